#include "mount/core/visible_intervals.h"

#include <catch2/catch.hpp>

#include <random>

namespace kelp::mount {
namespace {

filer::Chunk C(const std::string& fid, uint64_t off, uint64_t size, uint64_t seq, uint64_t boff = 0) {
  filer::Chunk c;
  c.set_fid(fid);
  c.set_offset(off);
  c.set_size(size);
  c.set_seq(seq);
  c.set_blob_offset(boff);
  return c;
}

// The byte-level truth: for each byte, which chunk (by fid) is visible, "" for a hole, "I" for inline.
std::string Paint(const std::vector<filer::Chunk>& cs, uint64_t size, uint64_t inline_size, uint64_t b) {
  std::string best = b < inline_size ? "I" : "";
  uint64_t best_seq = 0;
  bool any = false;
  for (const auto& c : cs) {
    if (b >= c.offset() && b < c.offset() + c.size() && (!any || c.seq() >= best_seq)) {
      best = c.fid(), best_seq = c.seq(), any = true;
    }
  }
  return b < size ? best : "-";
}

TEST_CASE("newest seq wins, holes and inline below") {
  std::vector<filer::Chunk> cs = {C("a", 0, 100, 1), C("b", 50, 100, 2), C("c", 300, 50, 3), C("d", 60, 10, 1)};
  std::vector<const filer::Chunk*> p;
  for (auto& c : cs) p.push_back(&c);
  auto v = ResolveVisibleIntervals(p, 400, 20);
  uint64_t pos = 0;
  for (const auto& i : v) {
    REQUIRE(i.offset == pos);
    pos = i.end();
  }
  REQUIRE(pos == 400);
  for (const auto& i : v) {
    for (uint64_t b = i.offset; b < i.end(); ++b) {
      std::string got = i.source == VisibleInterval::Source::kChunk ? i.chunk->fid()
                        : i.source == VisibleInterval::Source::kInline ? "I"
                                                                        : "";
      REQUIRE(got == Paint(cs, 400, 20, b));
    }
  }
  // b's interval starts 50 bytes in: its blob offset says so.
  auto clip = ClipIntervals(v, 120, 10);
  REQUIRE(clip.size() == 1);
  REQUIRE(clip[0].chunk->fid() == "b");
  REQUIRE(clip[0].blob_offset == 70);
}

TEST_CASE("random chunk lists resolve like the byte painter") {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<filer::Chunk> cs;
    int n = 1 + rng() % 20;
    for (int i = 0; i < n; ++i) cs.push_back(C(std::to_string(i), rng() % 500, 1 + rng() % 200, rng() % 10, rng() % 50));
    uint64_t size = rng() % 700, inl = rng() % 100;
    std::vector<const filer::Chunk*> p;
    for (auto& c : cs) p.push_back(&c);
    auto v = ResolveVisibleIntervals(p, size, inl);
    uint64_t pos = 0;
    for (const auto& i : v) {
      REQUIRE(i.offset == pos);
      pos = i.end();
      for (uint64_t b = i.offset; b < i.end(); ++b) {
        std::string got = i.source == VisibleInterval::Source::kChunk ? i.chunk->fid()
                          : i.source == VisibleInterval::Source::kInline ? "I"
                                                                          : "";
        REQUIRE(got == Paint(cs, size, inl, b));
        if (i.source == VisibleInterval::Source::kChunk) {
          REQUIRE(i.blob_offset + (b - i.offset) == i.chunk->blob_offset() + (b - i.chunk->offset()));
        }
      }
    }
    REQUIRE(pos == size);
  }
}

}  // namespace
}  // namespace kelp::mount
