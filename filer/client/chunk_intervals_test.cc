#include "filer/client/chunk_intervals.h"

#include <algorithm>
#include <random>

#include <catch2/catch.hpp>

using namespace kelp::filer;

namespace {

Chunk Make(std::string fid, uint64_t offset, uint64_t size, uint64_t blob_offset, uint64_t seq) {
  Chunk c;
  c.set_fid(std::move(fid));
  c.set_offset(offset);
  c.set_size(size);
  c.set_blob_offset(blob_offset);
  c.set_seq(seq);
  return c;
}

// What one byte of the file reads as.
struct Byte {
  int source = 0;  // 0 hole, 1 inline, 2 chunk
  size_t chunk = 0;
  uint64_t blob_pos = 0;
  bool operator==(const Byte&) const = default;
};

std::vector<Byte> Model(const std::vector<Chunk>& chunks, uint64_t size, uint64_t inline_size) {
  std::vector<Byte> bytes(size);
  for (uint64_t i = 0; i < std::min(size, inline_size); ++i) bytes[i].source = 1;
  std::vector<size_t> order(chunks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return chunks[a].seq() < chunks[b].seq(); });
  for (size_t idx : order) {
    const Chunk& c = chunks[idx];
    for (uint64_t k = 0; k < c.size(); ++k) {
      uint64_t pos = c.offset() + k;
      if (pos >= size) break;
      bytes[pos] = {2, idx, c.blob_offset() + k};
    }
  }
  return bytes;
}

std::vector<Byte> Expand(const std::vector<VisibleInterval>& ivs, const std::vector<Chunk>& chunks,
                         uint64_t size) {
  std::vector<Byte> bytes(size);
  uint64_t expect = 0;
  for (size_t n = 0; n < ivs.size(); ++n) {
    const auto& iv = ivs[n];
    REQUIRE(iv.offset == expect);
    REQUIRE(iv.size > 0);
    expect = iv.end();
    for (uint64_t k = 0; k < iv.size; ++k) {
      Byte& b = bytes[iv.offset + k];
      switch (iv.source) {
        case VisibleInterval::Source::kHole: b.source = 0; break;
        case VisibleInterval::Source::kInline: b.source = 1; break;
        case VisibleInterval::Source::kChunk:
          b.source = 2;
          b.chunk = static_cast<size_t>(iv.chunk - chunks.data());
          b.blob_pos = iv.blob_offset + k;
          break;
      }
    }
    if (n > 0) {
      const auto& prev = ivs[n - 1];
      bool mergeable = prev.source == iv.source &&
                       (iv.source != VisibleInterval::Source::kChunk || prev.chunk == iv.chunk);
      CHECK_FALSE(mergeable);  // canonical: neighbours always differ
    }
  }
  REQUIRE(expect == size);
  return bytes;
}

}  // namespace

TEST_CASE("visible intervals: newest seq wins, holes are zeros") {
  std::vector<Chunk> chunks = {Make("a", 0, 100, 0, 1), Make("b", 50, 100, 1000, 2),
                               Make("c", 200, 10, 0, 3)};
  auto ivs = ResolveVisibleIntervals(chunks, 300);
  REQUIRE(ivs.size() == 5);
  CHECK(ivs[0].chunk == &chunks[0]);
  CHECK(ivs[0].size == 50);
  CHECK(ivs[1].chunk == &chunks[1]);
  CHECK(ivs[1].offset == 50);
  CHECK(ivs[1].blob_offset == 1000);
  CHECK(ivs[1].size == 100);
  CHECK(ivs[2].source == VisibleInterval::Source::kHole);
  CHECK(ivs[2].offset == 150);
  CHECK(ivs[3].chunk == &chunks[2]);
  CHECK(ivs[4].source == VisibleInterval::Source::kHole);
  CHECK(ivs[4].end() == 300);
}

TEST_CASE("visible intervals: an older chunk does not cover a newer one whatever the order") {
  std::vector<Chunk> chunks = {Make("new", 10, 10, 0, 9), Make("old", 0, 100, 0, 1)};
  auto ivs = ResolveVisibleIntervals(chunks, 100);
  REQUIRE(ivs.size() == 3);
  CHECK(ivs[1].chunk->fid() == "new");
  CHECK(ivs[2].chunk->fid() == "old");
  CHECK(ivs[2].blob_offset == 20);
}

TEST_CASE("visible intervals: clipped by file size, inline data underneath") {
  std::vector<Chunk> chunks = {Make("a", 4, 4, 0, 1), Make("b", 90, 100, 0, 2)};
  auto ivs = ResolveVisibleIntervals(chunks, 95, 10);
  REQUIRE(ivs.size() == 5);
  CHECK(ivs[0].source == VisibleInterval::Source::kInline);
  CHECK(ivs[0].size == 4);
  CHECK(ivs[2].source == VisibleInterval::Source::kInline);
  CHECK(ivs[2].offset == 8);
  CHECK(ivs[2].size == 2);
  CHECK(ivs[3].source == VisibleInterval::Source::kHole);
  CHECK(ivs[4].end() == 95);
  CHECK(ResolveVisibleIntervals(chunks, 0).empty());
}

TEST_CASE("visible intervals: clip to a read range") {
  std::vector<Chunk> chunks = {Make("a", 0, 100, 500, 1)};
  auto ivs = ResolveVisibleIntervals(chunks, 200);
  auto r = ClipIntervals(ivs, 90, 20);
  REQUIRE(r.size() == 2);
  CHECK(r[0].offset == 90);
  CHECK(r[0].size == 10);
  CHECK(r[0].blob_offset == 590);
  CHECK(r[1].source == VisibleInterval::Source::kHole);
  CHECK(r[1].size == 10);
  CHECK(ClipIntervals(ivs, 300, 10).empty());
}

TEST_CASE("visible intervals match a byte model under random overlaps") {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 3000; ++round) {
    uint64_t size = rng() % 600;
    uint64_t inline_size = rng() % 3 == 0 ? rng() % 100 : 0;
    size_t n = rng() % 30;
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < n; ++i) {
      uint64_t off = rng() % 650;
      uint64_t len = rng() % 5 == 0 ? 0 : 1 + rng() % 200;
      uint64_t seq = rng() % 4 == 0 ? 7 : rng() % 1000;  // some ties
      chunks.push_back(Make("f" + std::to_string(i), off, len, rng() % 1000, seq));
    }
    auto ivs = ResolveVisibleIntervals(chunks, size, inline_size);
    INFO("round " << round);
    REQUIRE(Expand(ivs, chunks, size) == Model(chunks, size, inline_size));
    // Clipping agrees with the full view.
    uint64_t off = size ? rng() % size : 0;
    uint64_t len = rng() % 100;
    auto clipped = ClipIntervals(ivs, off, len);
    uint64_t covered = 0;
    for (const auto& iv : clipped) covered += iv.size;
    CHECK(covered == std::min(len, size - std::min(size, off)));
  }
}
