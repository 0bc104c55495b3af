#include "filer/cluster/sequencer.h"

#include <catch2/catch.hpp>

using namespace kelp::filer;

TEST_CASE("sequences never repeat across restarts") {
  auto kv = NewMemoryKvStore();
  uint64_t last = 0;
  {
    Sequencer s(kv.get(), "S/x", 100);
    REQUIRE(s.Load().ok());
    for (int i = 0; i < 250; ++i) {
      auto v = s.Next(3);
      REQUIRE(v.ok());
      CHECK(*v > last);
      last = *v + 2;
    }
  }
  {
    Sequencer s(kv.get(), "S/x", 100);
    REQUIRE(s.Load().ok());
    auto v = s.Next(1);
    REQUIRE(v.ok());
    CHECK(*v > last);
    REQUIRE(s.RaiseAbove(1000000).ok());
    CHECK(*s.Next(1) == 1000001);
  }
  Sequencer s(kv.get(), "S/x", 100);
  REQUIRE(s.Load().ok());
  CHECK(*s.Next(1) > 1000001);
}
