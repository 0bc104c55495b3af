#include "mount/core/dirty_buffer.h"

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

namespace kelp::mount {
namespace {

// The model: a byte image of the file and which bytes are dirty.
struct Model {
  std::string bytes;
  std::vector<bool> dirty;
  void Write(uint64_t off, const std::string& d) {
    if (bytes.size() < off + d.size()) bytes.resize(off + d.size()), dirty.resize(off + d.size());
    for (size_t i = 0; i < d.size(); ++i) bytes[off + i] = d[i], dirty[off + i] = true;
  }
  uint64_t count() const { return std::count(dirty.begin(), dirty.end(), true); }
};

void CheckAgainst(const DirtyBuffer& b, const Model& m) {
  REQUIRE(b.bytes() == m.count());
  std::string out(m.bytes.size(), '?');
  std::vector<bool> covered(m.bytes.size(), false);
  b.Overlay(0, out.size(), out.data(), [&](uint64_t s, uint64_t e) {
    for (uint64_t i = s; i < e; ++i) covered[i] = true;
  });
  for (size_t i = 0; i < out.size(); ++i) {
    REQUIRE(covered[i] == m.dirty[i]);
    if (m.dirty[i]) REQUIRE(out[i] == m.bytes[i]);
  }
}

TEST_CASE("DirtyBuffer matches a byte model under random writes") {
  std::mt19937 rng(42);
  DirtyBuffer b(4096);
  Model m;
  for (int i = 0; i < 2000; ++i) {
    uint64_t off = rng() % 20000;
    size_t len = 1 + rng() % 3000;
    std::string d(len, static_cast<char>('a' + i % 26));
    uint64_t before = b.bytes();
    uint64_t grew = b.Write(off, d);
    m.Write(off, d);
    REQUIRE(b.bytes() == before + grew);
    if (i % 100 == 0) CheckAgainst(b, m);
  }
  CheckAgainst(b, m);
}

TEST_CASE("DirtyBuffer merges sequential writes into one extent") {
  DirtyBuffer b(1 << 20);
  for (int i = 0; i < 100; ++i) b.Write(i * 1000, std::string(1000, 'x'));
  REQUIRE(b.extent_count() == 1);
  REQUIRE(b.bytes() == 100000);
  REQUIRE(b.end() == 100000);
}

TEST_CASE("DirtyBuffer reserves a streaming writer's slot at once, never much more for scattered writes") {
  constexpr uint64_t kSlot = 4 << 20;
  SECTION("1 MiB writes: after the first MiB the extent holds its whole slot") {
    DirtyBuffer b(kSlot);
    const std::string mib(1 << 20, 'm');
    b.Write(0, mib);
    b.Write(1 << 20, mib);
    CHECK(b.held_bytes() == kSlot);
    b.Write(2 << 20, mib);
    CHECK(b.held_bytes() == kSlot);  // no reallocation: room was there
  }
  SECTION("a MiB starting a slot gets the whole slot; one in the middle of it only its size") {
    DirtyBuffer b(kSlot);
    const std::string mib(1 << 20, 'm');
    b.Write(kSlot, mib);
    CHECK(b.held_bytes() == kSlot);
    b.Write(3 * kSlot + 4096, mib);
    CHECK(b.held_bytes() == kSlot + mib.size());
  }
  SECTION("scattered 64 KiB writes, two adjacent ones per slot: at most twice what they hold") {
    DirtyBuffer b(kSlot);
    const std::string piece(64 << 10, 'p');
    for (uint64_t slot = 0; slot < 64; ++slot) {
      b.Write(slot * kSlot + 4096, piece);
      b.Write(slot * kSlot + 4096 + piece.size(), piece);
    }
    CHECK(b.bytes() == 64 * 2 * piece.size());
    CHECK(b.held_bytes() <= 2 * b.bytes());
  }
}

TEST_CASE("DirtyBuffer hands out exactly the slots it covers completely") {
  const uint64_t S = 1000;
  DirtyBuffer b(S);
  Model m;
  b.Write(500, std::string(2700, 'a'));  // covers [500, 3200): slots 1 and 2 are full
  m.Write(500, std::string(2700, 'a'));
  auto full = b.TakeFullSlots();
  REQUIRE(full.size() == 2);
  REQUIRE(full[0].offset == 1000);
  REQUIRE(full[0].data.size() == S);
  REQUIRE(full[1].offset == 2000);
  // What is left: [500, 1000) and [3000, 3200).
  REQUIRE(b.bytes() == 500 + 200);
  REQUIRE(b.extent_count() == 2);
  REQUIRE(b.TakeFullSlots().empty());
  // Filling the rest of slot 0 makes it full.
  b.Write(0, std::string(500, 'b'));
  full = b.TakeFullSlots();
  REQUIRE(full.size() == 1);
  REQUIRE(full[0].offset == 0);
  REQUIRE(full[0].data.substr(0, 500) == std::string(500, 'b'));
  REQUIRE(full[0].data.substr(500) == std::string(500, 'a'));
}

TEST_CASE("DirtyBuffer truncate drops bytes at and past the size") {
  DirtyBuffer b(4096);
  b.Write(0, std::string(100, 'a'));
  b.Write(200, std::string(100, 'b'));
  REQUIRE(b.Truncate(250) == 50);
  REQUIRE(b.bytes() == 150);
  REQUIRE(b.end() == 250);
  REQUIRE(b.Truncate(50) == 100);
  REQUIRE(b.bytes() == 50);
  auto all = b.TakeAll();
  REQUIRE(all.size() == 1);
  REQUIRE(all[0].data == std::string(50, 'a'));
  REQUIRE(b.empty());
}

}  // namespace
}  // namespace kelp::mount

namespace kelp::mount {
namespace {

TEST_CASE("full slots at a write's offset are the same as a full scan finds there") {
  DirtyBuffer a(4096), b(4096);
  for (uint64_t off : {100ull, 9000ull, 50000ull}) {
    a.Write(off, std::string(10, 'x'));
    b.Write(off, std::string(10, 'x'));
  }
  // A write that fills slots 1 and 2 exactly, and part of 3.
  a.Write(4096, std::string(2 * 4096 + 100, 'y'));
  b.Write(4096, std::string(2 * 4096 + 100, 'y'));
  auto at = a.TakeFullSlotsAt(4096 + 5000);
  auto all = b.TakeFullSlots();
  REQUIRE(at.size() == 2);
  REQUIRE(all.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(at[i].offset == all[i].offset);
    CHECK(at[i].data == all[i].data);
  }
  CHECK(a.bytes() == b.bytes());
  CHECK(a.extent_count() == b.extent_count());
  CHECK(a.TakeFullSlotsAt(100).empty());   // a small extent
  CHECK(a.TakeFullSlotsAt(70000).empty()); // nothing there
}

TEST_CASE("a stream writes into the slot buffers finished uploads gave back") {
  constexpr uint64_t kSlot = 4 << 20;
  SlotBufferPool pool;
  DirtyBuffer b(kSlot, &pool);
  std::string mib(1 << 20, '\0');
  for (size_t i = 0; i < mib.size(); ++i) mib[i] = static_cast<char>(i * 7 + i / 4096);
  auto stream_slot = [&](uint64_t slot, char tag) {
    for (uint64_t i = 0; i < 4; ++i) {
      mib[0] = tag;
      b.Write(slot * kSlot + i * mib.size(), mib);
    }
  };
  stream_slot(0, 'a');
  std::vector<Extent> first = b.TakeFullSlots();
  REQUIRE(first.size() == 1);
  CHECK(pool.kept_bytes() == 0);
  const char* buffer = first[0].data.data();
  pool.Give(std::move(first[0].data));  // its upload finished
  CHECK(pool.kept_bytes() == kSlot);

  stream_slot(1, 'b');
  CHECK(pool.kept_bytes() == 0);  // taken by the stream
  std::vector<Extent> second = b.TakeFullSlots();
  REQUIRE(second.size() == 1);
  CHECK(second[0].data.data() == buffer);
  CHECK(second[0].offset == kSlot);
  REQUIRE(second[0].data.size() == kSlot);
  for (uint64_t i = 0; i < 4; ++i) {
    mib[0] = 'b';
    CHECK(second[0].data.compare(i * mib.size(), mib.size(), mib) == 0);
  }

  SECTION("scattered writes never take a kept buffer") {
    pool.Give(std::move(second[0].data));
    b.Write(2 * kSlot + 4096, std::string(64 << 10, 's'));
    b.Write(3 * kSlot, std::string(64 << 10, 's'));
    CHECK(pool.kept_bytes() == kSlot);
  }
}

TEST_CASE("the slot buffer pool keeps at most its bound and nothing small") {
  SlotBufferPool pool;
  auto buffer = [](size_t capacity) {
    std::string s;
    s.reserve(capacity);
    s.append(10, 'x');
    return s;
  };
  pool.Give(buffer(SlotBufferPool::kMinKept - 1));
  CHECK(pool.kept_bytes() == 0);
  for (int i = 0; i < 12; ++i) pool.Give(buffer(4 << 20));
  CHECK(pool.kept_bytes() <= SlotBufferPool::kMaxKeptBytes);
  CHECK(pool.kept_bytes() >= SlotBufferPool::kMaxKeptBytes - (4 << 20));
  std::string s = pool.Take(4 << 20);
  CHECK(s.empty());
  CHECK(s.capacity() >= (4u << 20));
  CHECK(pool.Take(64 << 20).capacity() < (64u << 20));  // none that big: a fresh string
}

}  // namespace
}  // namespace kelp::mount
