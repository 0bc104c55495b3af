#include <sys/stat.h>

#include "filer/core/test_util.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

TEST_CASE("root directory exists from the first start") {
  Harness h(KELP_BACKENDS);
  auto root = h.fs->GetAttr(1);
  REQUIRE(root.ok());
  CHECK(S_ISDIR(root->mode()));
  CHECK(root->nlink() == 2);
  CHECK(root->parent() == 1);
  CHECK(h.fs->InodeCount() == 1);
  h.RequireConsistent();
}

TEST_CASE("create makes each file type with its attributes") {
  Harness h(KELP_BACKENDS);
  auto before = *h.fs->GetAttr(1);
  h.clock.Advance(5s);
  CreateArgs a;
  a.parent = 1;
  a.name = "f";
  a.mode = S_IFREG | 0640;
  a.uid = 1000;
  a.gid = 100;
  auto f = h.fs->Create(a);
  REQUIRE(f.ok());
  CHECK(f->mode() == (S_IFREG | 0640));
  CHECK(f->uid() == 1000);
  CHECK(f->gid() == 100);
  CHECK(f->nlink() == 1);
  CHECK(f->size() == 0);
  CHECK(f->parent() == 1);
  CHECK(f->ino() > 1);
  CHECK(f->crtime_ns() == h.clock.WallNs());
  auto root = *h.fs->GetAttr(1);
  CHECK(root.mtime_ns() > before.mtime_ns());
  CHECK(root.ctime_ns() == root.mtime_ns());
  CHECK(root.nlink() == 2);  // files do not count

  uint64_t d = h.Mkdir(1, "d");
  CHECK(h.fs->GetAttr(d)->nlink() == 2);
  CHECK(h.fs->GetAttr(1)->nlink() == 3);

  struct Node {
    const char* name;
    uint32_t type;
    uint64_t rdev;
  };
  for (Node n : {Node{"fifo", S_IFIFO, 0}, Node{"chr", S_IFCHR, 0x0103},
                 Node{"blk", S_IFBLK, 0x0801}, Node{"sock", S_IFSOCK, 0}}) {
    CreateArgs m;
    m.parent = d;
    m.name = n.name;
    m.mode = n.type | 0600;
    m.rdev = n.rdev;
    auto r = h.fs->Create(m);
    REQUIRE(r.ok());
    CHECK((r->mode() & S_IFMT) == n.type);
    CHECK(r->rdev() == n.rdev);
  }
  // No type bits: a regular file (mknod(2) with mode 0).
  CreateArgs plain;
  plain.parent = d;
  plain.name = "plain";
  plain.mode = 0644;
  CHECK(S_ISREG(h.fs->Create(plain)->mode()));
  CHECK(h.fs->InodeCount() == 8);
  h.RequireConsistent();
}

TEST_CASE("symlink stores its target") {
  Harness h(KELP_BACKENDS);
  auto s = h.fs->Symlink(1, "l", "../some/where", 7, 8);
  REQUIRE(s.ok());
  CHECK(S_ISLNK(s->mode()));
  CHECK(s->symlink_target() == "../some/where");
  CHECK(s->size() == 13);
  CHECK(h.fs->Lookup(1, "l")->symlink_target() == "../some/where");
  CHECK(Err(h.fs->Symlink(1, "e", "", 0, 0)) == ENOENT);
  CHECK(Err(h.fs->Symlink(1, "long", std::string(4096, 'x'), 0, 0)) == ENAMETOOLONG);
  CHECK(h.fs->Symlink(1, "max", std::string(4095, 'x'), 0, 0).ok());
  CHECK(Err(h.fs->Symlink(1, "l", "x", 0, 0)) == EEXIST);
  h.RequireConsistent();
}

TEST_CASE("create: exclusive, existing names, and bad arguments") {
  Harness h(KELP_BACKENDS);
  uint64_t f = h.Mkfile(1, "f");
  uint64_t d = h.Mkdir(1, "d");
  CreateArgs a;
  a.parent = 1;
  a.name = "f";
  a.mode = S_IFREG | 0644;
  a.exclusive = true;
  CHECK(Err(h.fs->Create(a)) == EEXIST);
  a.exclusive = false;
  auto again = h.fs->Create(a);
  REQUIRE(again.ok());
  CHECK(again->ino() == f);  // open(O_CREAT) of an existing file
  a.name = "d";
  CHECK(Err(h.fs->Create(a)) == EISDIR);
  a.mode = S_IFDIR | 0755;
  CHECK(Err(h.fs->Create(a)) == EEXIST);  // mkdir is always exclusive
  a.name = "f";
  a.mode = S_IFIFO | 0644;
  CHECK(Err(h.fs->Create(a)) == EEXIST);

  a.mode = S_IFREG | 0644;
  for (std::string bad : {std::string(""), std::string("a/b"), std::string("a\0b", 3),
                          std::string("."), std::string("..")}) {
    a.name = bad;
    CHECK(Err(h.fs->Create(a)) == EINVAL);
  }
  a.name = std::string(256, 'n');
  CHECK(Err(h.fs->Create(a)) == ENAMETOOLONG);
  a.name = std::string(255, 'n');
  CHECK(h.fs->Create(a).ok());

  a.name = "x";
  a.parent = 9999;
  CHECK(Err(h.fs->Create(a)) == ENOENT);
  a.parent = f;
  CHECK(Err(h.fs->Create(a)) == ENOTDIR);
  a.parent = 0;
  CHECK(Err(h.fs->Create(a)) == ENOENT);
  a.parent = d;
  a.mode = S_IFLNK | 0777;  // symlinks go through Symlink
  CHECK(Err(h.fs->Create(a)) == EINVAL);
  a.mode = 0170000;  // not a type
  CHECK(Err(h.fs->Create(a)) == EINVAL);
  h.RequireConsistent();
}

TEST_CASE("create with open_handle needs a known session") {
  Harness h(KELP_BACKENDS);
  CreateArgs a;
  a.parent = 1;
  a.name = "f";
  a.open_handle = true;
  a.session = "nope";
  CHECK(h.fs->Create(a).status().code() == absl::StatusCode::kNotFound);
  CHECK(Err(h.fs->Lookup(1, "f")) == ENOENT);
}
