#include "mount/core/dir_listings.h"

#include <catch2/catch.hpp>

namespace kelp::mount {
namespace {

using Known = DirListings::Known;

TEST_CASE("dir listings: a directory made here is empty, and follows its changes in order") {
  DirListings l;
  uint64_t ino = 0;
  CHECK(l.Find(10, "a", &ino) == Known::kUnknown);
  l.Created(10, 1);
  CHECK(l.Find(10, "a", &ino) == Known::kAbsent);
  l.Added(10, 2, "a", 100);
  REQUIRE(l.Find(10, "a", &ino) == Known::kPresent);
  CHECK(ino == 100);
  // The event of the same change arrives after the reply: nothing happens twice.
  l.Added(10, 2, "a", 100);
  l.Removed(10, 3, "a");
  l.Added(10, 2, "a", 100);  // a late duplicate of an older change
  CHECK(l.Find(10, "a", &ino) == Known::kAbsent);
  // A change that skips a version means one went missing: the directory is forgotten.
  l.Added(10, 5, "b", 101);
  CHECK(l.Find(10, "b", &ino) == Known::kUnknown);
  CHECK(l.dirs() == 0);
}

TEST_CASE("dir listings: a change that says no version forgets the directory") {
  DirListings l;
  l.Created(1, 7);
  l.Added(1, 0, "x", 5);
  uint64_t ino;
  CHECK(l.Find(1, "x", &ino) == Known::kUnknown);
}

TEST_CASE("dir listings: knowledge older than a change already seen is refused") {
  DirListings l;
  // An event for directory 20 at version 4 came before the listing that shows version 3.
  l.Touched(20, 4);
  l.Listed(20, 3, {{"old", 1}});
  uint64_t ino;
  CHECK(l.Find(20, "old", &ino) == Known::kUnknown);
  l.Listed(20, 4, {{"new", 2}});
  REQUIRE(l.Find(20, "new", &ino) == Known::kPresent);
  CHECK(ino == 2);
  CHECK(l.Find(20, "old", &ino) == Known::kAbsent);
  // Likewise for a directory "created" after a change to it was seen.
  l.Touched(30, 2);
  l.Created(30, 1);
  CHECK(l.Find(30, "x", &ino) == Known::kUnknown);
  // A listing changing while it was read says version 0: nothing is learnt.
  l.Listed(40, 0, {{"a", 1}});
  CHECK(l.Find(40, "a", &ino) == Known::kUnknown);
}

TEST_CASE("dir listings: the name bound forgets the least recently used directories") {
  DirListings l(10);
  std::vector<std::pair<std::string, uint64_t>> four = {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}};
  l.Listed(1, 1, four);
  l.Listed(2, 1, four);
  uint64_t ino;
  CHECK(l.Find(1, "a", &ino) == Known::kPresent);  // 1 is now the most recently used
  l.Listed(3, 1, four);
  CHECK(l.names() <= 10);
  CHECK(l.Find(2, "a", &ino) == Known::kUnknown);
  CHECK(l.Find(1, "a", &ino) == Known::kPresent);
  CHECK(l.Find(3, "a", &ino) == Known::kPresent);
}

TEST_CASE("dir listings: a rename within one directory is one change") {
  DirListings l;
  l.Listed(5, 10, {{"from", 9}});
  l.Apply(5, 11, [](auto& names) {
    names.erase("from");
    names["to"] = 9;
  });
  uint64_t ino;
  CHECK(l.Find(5, "from", &ino) == Known::kAbsent);
  CHECK(l.Find(5, "to", &ino) == Known::kPresent);
}

}  // namespace
}  // namespace kelp::mount
