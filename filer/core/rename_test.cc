#include <sys/stat.h>

#include "filer/client/limits.h"
#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

TEST_CASE("rename within and across directories") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(1, "b");
  uint64_t f = h.Mkfile(a, "f");
  h.clock.Advance(1s);
  auto r = h.fs->Rename(a, "f", a, "g", 0);
  REQUIRE(r.ok());
  CHECK(r->moved.ino() == f);
  CHECK_FALSE(r->replaced.has_value());
  CHECK(r->moved.ctime_ns() == h.clock.WallNs());
  CHECK(h.Names(a) == std::vector<std::string>{"g"});
  CHECK(h.fs->GetAttr(a)->mtime_ns() == h.clock.WallNs());

  REQUIRE(h.fs->Rename(a, "g", b, "f", 0).ok());
  CHECK(h.Names(a).empty());
  CHECK(h.fs->Lookup(b, "f")->ino() == f);
  CHECK(h.fs->GetAttr(f)->parent() == b);

  // A directory moving across parents moves its ".." link: nlink follows.
  uint64_t sub = h.Mkdir(a, "sub");
  h.Mkfile(sub, "inner");
  CHECK(h.fs->GetAttr(a)->nlink() == 3);
  REQUIRE(h.fs->Rename(a, "sub", b, "sub2", 0).ok());
  CHECK(h.fs->GetAttr(a)->nlink() == 2);
  CHECK(h.fs->GetAttr(b)->nlink() == 3);
  CHECK(h.fs->GetAttr(sub)->parent() == b);
  CHECK(h.fs->Lookup(sub, "..")->ino() == b);
  CHECK(h.fs->ResolvePath("/b/sub2/inner").ok());
  h.RequireConsistent();
}

TEST_CASE("rename replaces a file, an empty directory, refuses mismatches") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f1 = h.Mkfile(d, "f1");
  uint64_t f2 = h.Mkfile(d, "f2");
  CommitChunksRequest c;
  c.set_ino(f2);
  *c.add_chunks() = MakeChunk(Fid(7), 0, 10);
  REQUIRE(h.fs->CommitChunks(c).ok());

  auto r = h.fs->Rename(d, "f1", d, "f2", 0);
  REQUIRE(r.ok());
  REQUIRE(r->replaced.has_value());
  CHECK(r->replaced->ino() == f2);
  CHECK(r->replaced->nlink() == 0);
  CHECK(h.fs->Lookup(d, "f2")->ino() == f1);
  CHECK(Err(h.fs->GetAttr(f2)) == ENOENT);
  CHECK(h.GcFids() == std::vector<std::string>{Fid(7)});

  uint64_t e1 = h.Mkdir(d, "e1");
  uint64_t e2 = h.Mkdir(d, "e2");
  uint64_t full = h.Mkdir(d, "full");
  h.Mkfile(full, "x");
  CHECK(h.fs->GetAttr(d)->nlink() == 5);
  CHECK(Err(h.fs->Rename(d, "e1", d, "full", 0)) == ENOTEMPTY);
  CHECK(Err(h.fs->Rename(d, "e1", d, "f2", 0)) == ENOTDIR);
  CHECK(Err(h.fs->Rename(d, "f2", d, "e1", 0)) == EISDIR);
  REQUIRE(h.fs->Rename(d, "e1", d, "e2", 0).ok());
  CHECK(h.fs->Lookup(d, "e2")->ino() == e1);
  CHECK(Err(h.fs->GetAttr(e2)) == ENOENT);
  CHECK(h.fs->GetAttr(d)->nlink() == 4);

  // Across directories, replacing an empty directory.
  uint64_t other = h.Mkdir(1, "other");
  h.Mkdir(other, "victim");
  REQUIRE(h.fs->Rename(d, "e2", other, "victim", 0).ok());
  CHECK(h.fs->GetAttr(d)->nlink() == 3);
  CHECK(h.fs->GetAttr(other)->nlink() == 3);
  CHECK(h.fs->GetAttr(e1)->parent() == other);
  h.RequireConsistent();
}

TEST_CASE("rename flags: NOREPLACE and EXCHANGE") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(1, "b");
  uint64_t f = h.Mkfile(a, "f");
  uint64_t sub = h.Mkdir(b, "sub");
  h.Mkfile(sub, "inner");

  CHECK(Err(h.fs->Rename(a, "f", b, "sub", kRenameNoReplace)) == EEXIST);
  REQUIRE(h.fs->Rename(a, "f", a, "f2", kRenameNoReplace).ok());
  CHECK(Err(h.fs->Rename(a, "f2", a, "none", kRenameExchange)) == ENOENT);
  CHECK(Err(h.fs->Rename(a, "f2", a, "x", kRenameExchange | kRenameNoReplace)) == EINVAL);
  CHECK(Err(h.fs->Rename(a, "f2", a, "x", 8)) == EINVAL);

  // Exchange a file with a non-empty directory across parents.
  auto r = h.fs->Rename(a, "f2", b, "sub", kRenameExchange);
  REQUIRE(r.ok());
  CHECK(r->moved.ino() == f);
  CHECK(r->replaced->ino() == sub);
  CHECK(h.fs->Lookup(a, "f2")->ino() == sub);
  CHECK(h.fs->Lookup(b, "sub")->ino() == f);
  CHECK(h.fs->GetAttr(sub)->parent() == a);
  CHECK(h.fs->GetAttr(f)->parent() == b);
  CHECK(h.fs->GetAttr(a)->nlink() == 3);
  CHECK(h.fs->GetAttr(b)->nlink() == 2);
  CHECK(h.fs->ResolvePath("/a/f2/inner").ok());
  h.RequireConsistent();

  // Exchange two directories in one parent: nlink unchanged.
  uint64_t x = h.Mkdir(1, "x");
  uint64_t y = h.Mkdir(1, "y");
  REQUIRE(h.fs->Rename(1, "x", 1, "y", kRenameExchange).ok());
  CHECK(h.fs->Lookup(1, "x")->ino() == y);
  CHECK(h.fs->Lookup(1, "y")->ino() == x);
  CHECK(h.fs->GetAttr(1)->nlink() == 6);
  h.RequireConsistent();
}

TEST_CASE("rename refuses to move a directory into its own subtree") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(a, "b");
  uint64_t c = h.Mkdir(b, "c");
  CHECK(Err(h.fs->Rename(1, "a", c, "a", 0)) == EINVAL);
  CHECK(Err(h.fs->Rename(1, "a", a, "self", 0)) == EINVAL);
  CHECK(Err(h.fs->Rename(a, "b", c, "b", kRenameNoReplace)) == EINVAL);
  // Exchanging an ancestor with its descendant.
  CHECK(Err(h.fs->Rename(1, "a", b, "c", kRenameExchange)) == EINVAL);
  CHECK(Err(h.fs->Rename(b, "c", 1, "a", kRenameExchange)) == EINVAL);
  // A target that is an ancestor of the source is never empty.
  CHECK(Err(h.fs->Rename(b, "c", 1, "a", 0)) == ENOTEMPTY);
  CHECK(Err(h.fs->Rename(1, "missing", 1, "z", 0)) == ENOENT);
  CHECK(Err(h.fs->Rename(1, "a", 999, "z", 0)) == ENOENT);
  CHECK(Err(h.fs->Rename(1, "a", 1, std::string(256, 'z'), 0)) == ENAMETOOLONG);
  CHECK(Err(h.fs->Rename(1, "a", 1, "z/z", 0)) == EINVAL);
  h.RequireConsistent();
}

TEST_CASE("rename between two links of one inode is a no-op") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  REQUIRE(h.fs->Link(f, 1, "g").ok());
  REQUIRE(h.fs->Rename(1, "f", 1, "g", 0).ok());
  CHECK(h.fs->Lookup(1, "f")->ino() == f);
  CHECK(h.fs->Lookup(1, "g")->ino() == f);
  CHECK(h.fs->GetAttr(f)->nlink() == 2);
  REQUIRE(h.fs->Rename(1, "f", 1, "f", 0).ok());
  h.RequireConsistent();
}

TEST_CASE("renaming a large subtree is one small batch") {
  Harness h(KELP_BACKENDS);
  uint64_t big = h.Mkdir(1, "big");
  for (int i = 0; i < 50; ++i) {
    uint64_t d = h.Mkdir(big, "d" + std::to_string(i));
    for (int j = 0; j < 10; ++j) h.Mkfile(d, "f" + std::to_string(j));
  }
  uint64_t dst = h.Mkdir(1, "dst");
  size_t writes = h.counting->writes_;
  REQUIRE(h.fs->Rename(1, "big", dst, "moved", 0).ok());
  CHECK(h.counting->writes_ == writes + 1);  // one atomic batch...
  CHECK(h.counting->last_batch_ <= 10);      // ...of a handful of keys, whatever is inside
  CHECK(h.fs->ResolvePath("/dst/moved/d49/f9").ok());
  h.RequireConsistent();
}

TEST_CASE("rename over a file that is open keeps it as an orphan") {
  Harness h(KELP_BACKENDS);
  auto session = h.fs->OpenSession("t");
  REQUIRE(session.ok());
  uint64_t victim = h.Mkfile(1, "victim");
  h.Mkfile(1, "new");
  REQUIRE(h.fs->Open(session->session(), victim).ok());
  REQUIRE(h.fs->Rename(1, "new", 1, "victim", 0).ok());
  auto a = h.fs->GetAttr(victim);
  REQUIRE(a.ok());
  CHECK(a->nlink() == 0);
  h.RequireConsistent();
  REQUIRE(h.fs->Release(session->session(), victim).ok());
  CHECK(Err(h.fs->GetAttr(victim)) == ENOENT);
  h.RequireConsistent();
}
