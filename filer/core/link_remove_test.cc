#include <sys/stat.h>

#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

TEST_CASE("hard links share one inode and count in nlink") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(1, "b");
  uint64_t f = h.Mkfile(a, "f");
  auto before = *h.fs->GetAttr(f);
  h.clock.Advance(1s);
  auto l = h.fs->Link(f, b, "g");
  REQUIRE(l.ok());
  CHECK(l->ino() == f);
  CHECK(l->nlink() == 2);
  CHECK(l->ctime_ns() > before.ctime_ns());
  CHECK(h.fs->Lookup(b, "g")->ino() == f);
  CHECK(h.fs->GetAttr(b)->mtime_ns() == h.clock.WallNs());
  CHECK(h.fs->GetAttr(b)->nlink() == 2);

  CHECK(Err(h.fs->Link(a, b, "dirlink")) == EPERM);
  CHECK(Err(h.fs->Link(f, b, "g")) == EEXIST);
  CHECK(Err(h.fs->Link(9999, b, "x")) == ENOENT);
  CHECK(Err(h.fs->Link(f, f, "x")) == ENOTDIR);
  CHECK(Err(h.fs->Link(f, 9999, "x")) == ENOENT);
  CHECK(Err(h.fs->Link(f, b, "")) == EINVAL);

  // Unlinking one name keeps the inode for the other.
  auto u = h.fs->Unlink(a, "f");
  REQUIRE(u.ok());
  CHECK(u->nlink() == 1);
  CHECK(h.fs->GetAttr(f)->nlink() == 1);
  CHECK(h.fs->InodeCount() == 4);
  h.RequireConsistent();
  REQUIRE(h.fs->Unlink(b, "g").ok());
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  CHECK(h.fs->InodeCount() == 3);
  h.RequireConsistent();
}

TEST_CASE("unlink: errors, parent times, and the last link purges data") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f = h.Mkfile(d, "f");
  CommitChunksRequest c;
  c.set_ino(f);
  *c.add_chunks() = MakeChunk(Fid(1), 0, 100);
  *c.add_chunks() = MakeChunk(Fid(2), 100, 100);
  REQUIRE(h.fs->CommitChunks(c).ok());
  REQUIRE(h.fs->SetXattr(f, "user.k", "v", 0).ok());

  CHECK(Err(h.fs->Unlink(1, "d")) == EISDIR);
  CHECK(Err(h.fs->Unlink(d, "nope")) == ENOENT);
  CHECK(Err(h.fs->Unlink(f, "x")) == ENOTDIR);
  CHECK(Err(h.fs->Unlink(777, "x")) == ENOENT);
  CHECK(Err(h.fs->Unlink(d, "a/b")) == EINVAL);

  h.clock.Advance(2s);
  auto u = h.fs->Unlink(d, "f");
  REQUIRE(u.ok());
  CHECK(u->nlink() == 0);
  CHECK(h.fs->GetAttr(d)->mtime_ns() == h.clock.WallNs());
  CHECK(h.fs->GetAttr(d)->ctime_ns() == h.clock.WallNs());
  CHECK(Err(h.fs->GetAttr(f)) == ENOENT);
  CHECK(Err(h.fs->ListXattr(f)) == ENOENT);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(1), Fid(2)});
  h.RequireConsistent();
}

TEST_CASE("rmdir: only empty directories, and the parent's nlink follows") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t sub = h.Mkdir(d, "sub");
  h.Mkfile(sub, "f");
  CHECK(h.fs->GetAttr(d)->nlink() == 3);
  CHECK(Err(h.fs->Rmdir(d, "sub")) == ENOTEMPTY);
  CHECK(Err(h.fs->Rmdir(sub, "f")) == ENOTDIR);
  CHECK(Err(h.fs->Rmdir(d, "nope")) == ENOENT);
  CHECK(Err(h.fs->Rmdir(d, ".")) == EINVAL);
  REQUIRE(h.fs->Unlink(sub, "f").ok());
  REQUIRE(h.fs->Rmdir(d, "sub").ok());
  CHECK(h.fs->GetAttr(d)->nlink() == 2);
  CHECK(Err(h.fs->GetAttr(sub)) == ENOENT);
  CHECK(h.Names(d).empty());
  h.RequireConsistent();
}

TEST_CASE("remove tree deletes a whole subtree and its data") {
  Harness h(KELP_BACKENDS);
  uint64_t top = h.Mkdir(1, "top");
  for (int i = 0; i < 3; ++i) {
    uint64_t d = h.Mkdir(top, "d" + std::to_string(i));
    uint64_t deep = h.Mkdir(d, "deep");
    for (int j = 0; j < 5; ++j) {
      uint64_t f = h.Mkfile(deep, "f" + std::to_string(j));
      CommitChunksRequest c;
      c.set_ino(f);
      *c.add_chunks() = MakeChunk(Fid(100 * i + j), 0, 10);
      REQUIRE(h.fs->CommitChunks(c).ok());
    }
  }
  h.Mkfile(1, "plain");
  REQUIRE(h.fs->RemoveTree(1, "top").ok());
  REQUIRE(h.fs->RemoveTree(1, "plain").ok());
  CHECK(h.Names(1).empty());
  CHECK(h.fs->InodeCount() == 1);
  CHECK(h.GcFids().size() == 15);
  CHECK(h.fs->GetAttr(1)->nlink() == 2);
  CHECK(Err(h.fs->RemoveTree(1, "top")) == ENOENT);
  h.RequireConsistent();
}
