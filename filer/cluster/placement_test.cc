#include "filer/cluster/placement.h"

#include <set>

#include <catch2/catch.hpp>

using namespace kelp::filer;

TEST_CASE("replication strings parse") {
  CHECK(Replication::Parse("")->copies() == 1);
  CHECK(Replication::Parse("001")->copies() == 2);
  CHECK(Replication::Parse("210")->copies() == 4);
  CHECK_FALSE(Replication::Parse("01").ok());
  CHECK_FALSE(Replication::Parse("0a1").ok());
}

TEST_CASE("placement honours racks and data centers") {
  std::vector<Candidate> cs = {
      {"a1", "dc1", "r1", 3}, {"a2", "dc1", "r1", 3}, {"b1", "dc1", "r2", 3}, {"c1", "dc2", "r1", 3}};
  std::mt19937_64 rng(1);
  for (int i = 0; i < 50; ++i) {
    auto p = PlaceVolume(cs, *Replication::Parse("001"), rng);
    REQUIRE(p.ok());
    REQUIRE(p->size() == 2);
    // Both copies in one rack of one data center, on distinct servers.
    CHECK(std::set<std::string>(p->begin(), p->end()) == std::set<std::string>{"a1", "a2"});
    auto q = PlaceVolume(cs, *Replication::Parse("110"), rng);
    REQUIRE(q.ok());
    REQUIRE(q->size() == 3);
    std::set<std::string> got(q->begin(), q->end());
    CHECK(got.size() == 3);
    CHECK(got.count("c1"));  // the other data center
    CHECK(got.count("b1"));  // the other rack
  }
  CHECK_FALSE(PlaceVolume(cs, *Replication::Parse("002"), rng).ok());
  std::vector<Candidate> full = {{"a1", "", "", 0}};
  CHECK_FALSE(PlaceVolume(full, *Replication::Parse(""), rng).ok());
}
