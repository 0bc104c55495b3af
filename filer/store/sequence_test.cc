#include "filer/store/sequence.h"

#include <catch2/catch.hpp>

using namespace kelp::filer;

TEST_CASE("sequences never repeat across restarts") {
  auto kv = NewMemoryKvStore();
  uint64_t last = 0;
  {
    SequenceAllocator s(kv.get(), "x", 100);
    REQUIRE(s.Load(1).ok());
    for (int i = 0; i < 250; ++i) {
      auto v = s.Next(3);
      REQUIRE(v.ok());
      CHECK(*v > last);
      last = *v + 2;
    }
  }
  {
    SequenceAllocator s(kv.get(), "x", 100);
    REQUIRE(s.Load(1).ok());
    auto v = s.Next(1);
    REQUIRE(v.ok());
    CHECK(*v > last);
    REQUIRE(s.RaiseAbove(1000000).ok());
    CHECK(*s.Next(1) == 1000001);
  }
  SequenceAllocator s(kv.get(), "x", 100);
  REQUIRE(s.Load(1).ok());
  CHECK(*s.Next(1) > 1000001);
}

TEST_CASE("one allocator leaves no gap when a call needs more than its range has left") {
  auto kv = NewMemoryKvStore();
  SequenceAllocator s(kv.get(), "x", 10);
  REQUIRE(s.Load(1).ok());
  uint64_t expect = *s.Next(1) + 1;
  // Calls of 1, 2 and 3 numbers cross many range ends.
  for (int i = 0; i < 300; ++i) {
    uint64_t n = 1 + i % 3;
    auto v = s.Next(n);
    REQUIRE(v.ok());
    REQUIRE(*v == expect);
    expect += n;
  }
  // Another allocator on the store (another filer) takes the numbers after the mark: this one
  // then starts above them.
  SequenceAllocator other(kv.get(), "x", 10);
  REQUIRE(other.Load(1).ok());
  uint64_t theirs = *other.Next(1);
  CHECK(theirs >= expect);
  uint64_t mine = 0;
  for (int i = 0; i < 30; ++i) mine = *s.Next(3);
  CHECK(mine > theirs + 10);
}
