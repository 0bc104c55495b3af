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
