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

TEST_CASE("unlink many: one directory's names in one write, each with its own answer") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  uint64_t other = h.Mkdir(1, "other");
  uint64_t a = h.Mkfile(d, "a");
  uint64_t b = h.Mkfile(d, "b");
  uint64_t two = h.Mkfile(d, "two");
  REQUIRE(h.fs->Link(two, d, "two2").ok());  // both names go: purged
  uint64_t kept = h.Mkfile(d, "kept");
  REQUIRE(h.fs->Link(kept, other, "k").ok());  // one name stays elsewhere: kept, nlink 1
  h.Mkdir(d, "sub");
  auto s = h.fs->OpenSession("m")->session();
  uint64_t open = h.Mkfile(d, "open", s);
  CommitChunksRequest c;
  c.set_ino(b);
  *c.add_chunks() = MakeChunk(Fid(7), 0, 10);
  REQUIRE(h.fs->CommitChunks(c).ok());
  const int64_t inodes = h.fs->InodeCount();
  const uint64_t version = h.fs->GetAttr(d)->version();
  auto sub_events = h.fs->Subscribe(0, "");
  REQUIRE(sub_events.ok());
  Drain(**sub_events);
  h.clock.Advance(1s);

  std::vector<std::string> names{"a", "b", "a", "missing", "sub", "two", "two2", "kept", "bad/name", "open"};
  auto r = h.fs->UnlinkMany(d, names);
  REQUIRE(r.size() == names.size());
  REQUIRE(r[0].attr.ok());
  CHECK(r[0].attr->ino() == a);
  CHECK(r[0].attr->nlink() == 0);
  CHECK(r[1].attr.ok());
  CHECK(Err(r[2].attr) == ENOENT);  // "a" again: gone by then
  CHECK(Err(r[3].attr) == ENOENT);
  CHECK(Err(r[4].attr) == EISDIR);
  CHECK(r[5].attr.ok());
  REQUIRE(r[6].attr.ok());
  CHECK(r[6].attr->nlink() == 0);
  REQUIRE(r[7].attr.ok());
  CHECK(r[7].attr->nlink() == 1);
  CHECK(Err(r[8].attr) == EINVAL);
  REQUIRE(r[9].attr.ok());
  // Each removal's directory version, as separate unlinks would have left it.
  std::vector<size_t> done{0, 1, 5, 6, 7, 9};
  for (size_t j = 0; j < done.size(); ++j) {
    REQUIRE(r[done[j]].parent_attr.has_value());
    CHECK(r[done[j]].parent_attr->version() == version + j + 1);
    CHECK(r[done[j]].parent_attr->mtime_ns() == h.clock.WallNs());
  }
  for (size_t i : {2, 3, 4, 8}) CHECK_FALSE(r[i].parent_attr.has_value());
  auto dir = h.fs->GetAttr(d);
  CHECK(dir->version() == version + done.size());
  CHECK(dir->mtime_ns() == h.clock.WallNs());
  CHECK(h.Names(d) == std::vector<std::string>{"sub"});
  CHECK(Err(h.fs->GetAttr(a)) == ENOENT);
  CHECK(Err(h.fs->GetAttr(two)) == ENOENT);
  CHECK(h.fs->GetAttr(kept)->nlink() == 1);
  CHECK(h.fs->GetAttr(open).ok());  // open: an orphan until released
  CHECK(h.fs->InodeCount() == inodes - 3);  // a, b, two
  CHECK(h.GcFids() == std::vector<std::string>{Fid(7)});
  // One event per name removed, in order, each with its directory version.
  auto ev = Drain(**sub_events);
  REQUIRE(ev.size() == done.size());
  for (size_t j = 0; j < done.size(); ++j) {
    CHECK(ev[j].kind() == EVENT_DELETE);
    CHECK(ev[j].name() == names[done[j]]);
    CHECK(ev[j].parent_version() == version + j + 1);
  }
  h.RequireConsistent();
  REQUIRE(h.fs->Release(s, open).ok());
  h.RequireConsistent();

  // A directory that is not there fails every name.
  auto none = h.fs->UnlinkMany(9999, {"x", "y"});
  REQUIRE(none.size() == 2);
  CHECK(Err(none[0].attr) == ENOENT);
  CHECK(Err(none[1].attr) == ENOENT);
}

namespace {

// "fid:size" of each blob, sorted.
std::vector<std::string> Freed(const std::vector<FreedBlob>& blobs) {
  std::vector<std::string> out;
  for (const FreedBlob& b : blobs) out.push_back(b.fid() + ":" + std::to_string(b.size()));
  std::sort(out.begin(), out.end());
  return out;
}

// A file with blobs Fid(first) and Fid(first + 1) of 4,000 and 5,000 bytes.
uint64_t FileWithBlobs(Harness& h, uint64_t parent, const std::string& name, int first) {
  uint64_t f = h.Mkfile(parent, name);
  CommitChunksRequest c;
  c.set_ino(f);
  (*c.add_chunks() = MakeChunk(Fid(first), 0, 4000)).set_blob_size(4000);
  (*c.add_chunks() = MakeChunk(Fid(first + 1), 4000, 100, 300)).set_blob_size(5000);
  REQUIRE(h.fs->CommitChunks(c).ok());
  return f;
}

}  // namespace

TEST_CASE("the blobs a change frees are answered, with their sizes, to the one that freed them") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "d");
  FileWithBlobs(h, d, "f", 10);
  const std::vector<std::string> f_blobs{Fid(10) + ":4000", Fid(11) + ":5000"};
  std::vector<FreedBlob> freed{FreedBlob()};
  REQUIRE(h.fs->Unlink(d, "f", &freed).ok());
  CHECK(Freed(freed) == f_blobs);

  // A name that is not the last frees nothing; the last one frees the blobs.
  uint64_t g = FileWithBlobs(h, d, "g", 20);
  REQUIRE(h.fs->Link(g, d, "g2").ok());
  REQUIRE(h.fs->Unlink(d, "g", &freed).ok());
  CHECK(freed.empty());
  REQUIRE(h.fs->Unlink(d, "g2", &freed).ok());
  CHECK(Freed(freed) == std::vector<std::string>{Fid(20) + ":4000", Fid(21) + ":5000"});

  // An open file's blobs stay until it is released: nothing is freed by the unlink.
  auto s = h.fs->OpenSession("m")->session();
  uint64_t open = h.Mkfile(d, "open", s);
  CommitChunksRequest c;
  c.set_ino(open);
  (*c.add_chunks() = MakeChunk(Fid(30), 0, 10)).set_blob_size(10);
  REQUIRE(h.fs->CommitChunks(c).ok());
  REQUIRE(h.fs->Unlink(d, "open", &freed).ok());
  CHECK(freed.empty());
  REQUIRE(h.fs->Release(s, std::vector<uint64_t>{open}, &freed).ok());
  CHECK(Freed(freed) == std::vector<std::string>{Fid(30) + ":10"});

  // Unlink many: with the name that took the last link, once.
  uint64_t m = FileWithBlobs(h, d, "m", 40);
  REQUIRE(h.fs->Link(m, d, "m2").ok());
  FileWithBlobs(h, d, "n", 50);
  auto r = h.fs->UnlinkMany(d, {"m", "n", "m2"});
  REQUIRE(r.size() == 3);
  CHECK(r[0].freed.empty());
  CHECK(Freed(r[1].freed) == std::vector<std::string>{Fid(50) + ":4000", Fid(51) + ":5000"});
  CHECK(Freed(r[2].freed) == std::vector<std::string>{Fid(40) + ":4000", Fid(41) + ":5000"});

  // A rename over a file frees the replaced file's blobs.
  FileWithBlobs(h, d, "old", 60);
  FileWithBlobs(h, d, "new", 70);
  auto moved = h.fs->Rename(d, "new", d, "old", 0);
  REQUIRE(moved.ok());
  CHECK(Freed(moved->freed) == std::vector<std::string>{Fid(60) + ":4000", Fid(61) + ":5000"});

  // A commit that replaces the content frees the old blobs.
  uint64_t p = FileWithBlobs(h, d, "p", 80);
  CommitChunksRequest replace;
  replace.set_ino(p);
  replace.set_replace(true);
  (*replace.add_chunks() = MakeChunk(Fid(82), 0, 100)).set_blob_size(100);
  auto committed = h.fs->CommitChunks(replace);
  REQUIRE(committed.ok());
  CHECK(Freed({committed->freed().begin(), committed->freed().end()}) ==
        std::vector<std::string>{Fid(80) + ":4000", Fid(81) + ":5000"});
  h.RequireConsistent();
}
