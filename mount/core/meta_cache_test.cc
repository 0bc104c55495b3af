#include "mount/core/meta_cache.h"

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <chrono>
#include <thread>

namespace kelp::mount {
namespace {

using namespace std::chrono_literals;

filer::Attr MakeAttr(uint64_t ino, uint64_t version, uint32_t mode = S_IFREG | 0644, bool no_xattrs = false) {
  filer::Attr a;
  a.set_ino(ino);
  a.set_version(version);
  a.set_mode(mode);
  a.set_gid(77);
  a.set_no_xattrs(no_xattrs);
  return a;
}

// Polls pred until it holds (at most 5 s): for TTL expiry.
template <typename Pred>
bool Eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST_CASE("meta cache: attributes come back until dropped or expired, never older over newer") {
  MetaCache c(50ms, 30s);
  CHECK_FALSE(c.GetAttr(5).has_value());
  c.PutAttr(MakeAttr(5, 3));
  REQUIRE(c.GetAttr(5).has_value());
  CHECK(c.GetAttr(5)->version() == 3);
  c.PutAttr(MakeAttr(5, 2));  // a reply that crossed a newer event
  CHECK(c.GetAttr(5)->version() == 3);
  c.PutAttr(MakeAttr(5, 4));
  CHECK(c.GetAttr(5)->version() == 4);
  c.DropAttr(5);
  CHECK_FALSE(c.GetAttr(5).has_value());
  c.PutAttr(MakeAttr(6, 1));
  CHECK(Eventually([&] { return !c.GetAttr(6).has_value(); }));

  MetaCache off(0s, 0s);
  off.PutAttr(MakeAttr(5, 1));
  off.PutEntry(1, "a", 5);
  CHECK_FALSE(off.GetAttr(5).has_value());
  CHECK_FALSE(off.GetEntry(1, "a").has_value());
}

TEST_CASE("meta cache: positive and negative entries, dropped one by one or by directory") {
  MetaCache c(30s, 50ms);
  c.PutEntry(1, "a", 10);
  c.PutEntry(1, "gone", 0);  // "no such name"
  c.PutEntry(2, "a", 20);
  CHECK(c.GetEntry(1, "a") == std::optional<uint64_t>(10));
  CHECK(c.GetEntry(1, "gone") == std::optional<uint64_t>(0));
  CHECK_FALSE(c.GetEntry(1, "other").has_value());
  c.DropEntry(1, "gone");
  CHECK_FALSE(c.GetEntry(1, "gone").has_value());
  c.DropDir(1);
  CHECK_FALSE(c.GetEntry(1, "a").has_value());
  CHECK(c.GetEntry(2, "a") == std::optional<uint64_t>(20));  // other directories stay
  CHECK(Eventually([&] { return !c.GetEntry(2, "a").has_value(); }));
}

TEST_CASE("meta cache: known-absent xattrs, and the quarantine after a change") {
  MetaCache c(30s, 30s);
  CHECK_FALSE(c.HasNoXattr(5, "security.capability"));
  c.PutNoXattr(5, "security.capability");
  CHECK(c.HasNoXattr(5, "security.capability"));
  CHECK_FALSE(c.HasNoXattr(5, "user.x"));
  CHECK_FALSE(c.HasNoXattrs(5));
  // Attributes saying "no xattrs at all" answer for every name.
  c.PutAttr(MakeAttr(6, 1, S_IFREG | 0644, true));
  CHECK(c.HasNoXattrs(6));
  CHECK(c.HasNoXattr(6, "user.anything"));
  // Attributes that have xattrs forget it.
  c.PutAttr(MakeAttr(6, 2, S_IFREG | 0644, false));
  CHECK_FALSE(c.HasNoXattrs(6));
  // After a change, "no xattrs" in a (possibly older) reply is not believed for a while.
  c.PutNoXattr(5, "user.y");
  c.DropXattrs(5);
  CHECK_FALSE(c.HasNoXattr(5, "security.capability"));
  CHECK_FALSE(c.HasNoXattr(5, "user.y"));
  c.PutAttr(MakeAttr(5, 9, S_IFREG | 0644, true));
  CHECK_FALSE(c.HasNoXattrs(5));
}

TEST_CASE("meta cache: a directory's mode and group outlive its attributes; the size stays bounded") {
  MetaCache c(30s, 30s, 100);
  c.PutAttr(MakeAttr(3, 1, S_IFDIR | 02775));
  c.DropAttr(3);
  auto mg = c.DirModeGid(3);
  REQUIRE(mg.has_value());
  CHECK(mg->first == (S_IFDIR | 02775));
  CHECK(mg->second == 77);
  c.PutAttr(MakeAttr(4, 1));
  CHECK_FALSE(c.DirModeGid(4).has_value());  // files are not kept
  for (uint64_t i = 0; i < 1000; ++i) {
    c.PutAttr(MakeAttr(1000 + i, 1));
    c.PutEntry(1, "n" + std::to_string(i), 1000 + i);
    CHECK(c.size() <= 2 * 100);
  }
  CHECK(c.GetAttr(1999).has_value());  // the newest is there
  c.Clear();
  CHECK(c.size() == 0);
  CHECK_FALSE(c.DirModeGid(3).has_value());
}

}  // namespace
}  // namespace kelp::mount
