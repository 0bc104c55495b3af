// RunFsck, as `kelp filer.fsck` runs it, on a RocksDB store a filer wrote and then closed:
// exit codes, what it prints, that -fix leaves a store the filer uses again, and that it keeps
// off a store in use. Blob checks against volume servers run in tests/fsck_test.cc.
#include "filer/fsck/fsck.h"

#include <sys/stat.h>

#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "filer/core/test_util.h"
#include "filer/fsck/repair.h"
#include "filer/store/keys.h"
#include "filer/store/records.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;

namespace {

struct Run {
  int code = -1;
  std::vector<std::string> lines;
  bool Has(std::string_view needle) const {
    for (const auto& l : lines) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  std::string Text() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

Run Fsck(const std::string& dir, bool fix) {
  FsckOptions o;
  o.dir = dir;
  o.fix = fix;
  Run r;
  r.code = RunFsck(o, [&](std::string_view l) { r.lines.emplace_back(l); });
  return r;
}

}  // namespace

TEST_CASE("filer.fsck: clean store exits 0, each damage exits 1, -fix repairs, then clean") {
  Harness h("rocksdb");
  uint64_t d = h.Mkdir(1, "d");
  uint64_t f = h.Mkfile(d, "f");
  uint64_t g = h.Mkfile(d, "g");
  uint64_t lost = h.Mkfile(1, "lost");
  h.Mkfile(1, "dangling");
  h.Close();
  Run clean = Fsck(h.dir().string(), false);
  INFO(clean.Text());
  CHECK(clean.code == kFsckClean);
  CHECK(clean.Has("clean"));

  // One of each kind the brief names: wrong nlink, a dangling dentry, an unreachable inode,
  // an unlinked inode missing from the orphan list.
  {
    auto kv = OpenRocksKvStore(h.dir().string());
    REQUIRE(kv.ok());
    auto rec = DecodeInode(f, *(*kv)->Get(keys::InodeKey(f)));
    REQUIRE(rec.ok());
    rec->nlink = 5;
    REQUIRE((*kv)->Put(keys::InodeKey(f), EncodeInode(*rec)).ok());
    auto dangling = DecodeDentry(*(*kv)->Get(keys::DentryKey(1, "dangling")));
    REQUIRE(dangling.ok());
    REQUIRE((*kv)->Delete(keys::InodeKey(dangling->ino)).ok());
    auto l = DecodeDentry(*(*kv)->Get(keys::DentryKey(1, "lost")));
    REQUIRE(l.ok());
    REQUIRE((*kv)->Delete(keys::DentryKey(1, "lost")).ok());
    REQUIRE((*kv)->Delete(keys::DirIndexKey(1, l->cookie)).ok());
    auto gd = DecodeDentry(*(*kv)->Get(keys::DentryKey(d, "g")));
    REQUIRE(gd.ok());
    auto grec = DecodeInode(g, *(*kv)->Get(keys::InodeKey(g)));
    REQUIRE(grec.ok());
    grec->nlink = 0;
    REQUIRE((*kv)->Put(keys::InodeKey(g), EncodeInode(*grec)).ok());
    REQUIRE((*kv)->Delete(keys::DentryKey(d, "g")).ok());
    REQUIRE((*kv)->Delete(keys::DirIndexKey(d, gd->cookie)).ok());
  }
  Run bad = Fsck(h.dir().string(), false);
  INFO(bad.Text());
  CHECK(bad.code == kFsckProblems);
  CHECK(bad.Has(fmt::format("inode {}: nlink 5 but 1 names", f)));
  CHECK(bad.Has("dangling entry"));
  CHECK(bad.Has(fmt::format("inode {}: nlink 1 but no name (unreachable)", lost)));
  CHECK(bad.Has(fmt::format("inode {}: nlink 0 and no name, but not on the orphan list", g)));
  // Without -fix nothing changed.
  CHECK(Fsck(h.dir().string(), false).code == kFsckProblems);

  Run fixed = Fsck(h.dir().string(), true);
  INFO(fixed.Text());
  CHECK(fixed.code == kFsckClean);
  CHECK(fixed.Has("fixed: "));
  CHECK(fixed.Has("repairs made"));
  Run after = Fsck(h.dir().string(), false);
  INFO(after.Text());
  CHECK(after.code == kFsckClean);

  h.Open();
  h.RequireConsistent();
  CHECK(h.fs->GetAttr(f)->nlink() == 1);
  CHECK_FALSE(h.fs->Lookup(1, "dangling").ok());
  auto lf = h.fs->Lookup(1, std::string(kLostFound));
  REQUIRE(lf.ok());
  CHECK(h.fs->Lookup(lf->ino(), fmt::format("#{}", lost))->ino() == lost);
  // g was put on the orphan list: the filer purges it.
  h.fs->RunMaintenance();
  CHECK_FALSE(h.fs->GetAttr(g).ok());
}

TEST_CASE("filer.fsck keeps off a store a filer has open, and needs a store") {
  Harness h("rocksdb");
  Run busy = Fsck(h.dir().string(), true);
  INFO(busy.Text());
  CHECK(busy.code == kFsckProblems);
  CHECK(busy.Has("in use"));
  h.Close();
  CHECK(Fsck(h.dir().string(), false).code == kFsckClean);
  // The layouts of kelp filer -dir (<dir>/meta) and kelp server -dir (<dir>/filer/meta).
  for (const char* sub : {"meta", "filer/meta"}) {
    std::filesystem::path parent = h.dir().string() + "-parent";
    std::filesystem::create_directories((parent / sub).parent_path());
    std::filesystem::rename(h.dir(), parent / sub);
    CHECK(FindFilerStore(parent.string()).value() == (parent / sub).string());
    CHECK(Fsck(parent.string(), false).code == kFsckClean);
    std::filesystem::rename(parent / sub, h.dir());
    std::filesystem::remove_all(parent);
  }
  Run none = Fsck(h.dir().string() + "-nothing", false);
  CHECK(none.code == kFsckProblems);
  CHECK(none.Has("no filer store"));
  CHECK_FALSE(std::filesystem::exists(h.dir().string() + "-nothing"));
  h.Open();
}

TEST_CASE("filer.fsck finds nothing to repair after concurrent creates, renames and unlinks") {
  Harness h("rocksdb");
  std::vector<uint64_t> dirs = {h.Mkdir(1, "a"), h.Mkdir(1, "b")};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 300; ++i) {
        uint64_t from = dirs[rng() % 2], to = dirs[rng() % 2];
        std::string name = "n" + std::to_string(rng() % 20);
        CreateArgs a;
        a.parent = from;
        a.name = name;
        a.mode = (rng() % 4 == 0 ? S_IFDIR : S_IFREG) | 0755;
        switch (rng() % 4) {
          case 0:
            (void)h.fs->Create(a);
            break;
          case 1:
            (void)h.fs->Rename(from, name, to, "n" + std::to_string(rng() % 20), 0);
            break;
          case 2:
            (void)h.fs->Unlink(from, name);
            (void)h.fs->Rmdir(from, name);
            break;
          default:
            if (auto f = h.fs->Lookup(from, name); f.ok() && !S_ISDIR(f->mode())) {
              (void)h.fs->Link(f->ino(), to, "l" + std::to_string(rng() % 20));
            }
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(h.Names(dirs[0]).size() + h.Names(dirs[1]).size() > 0);
  h.Close();
  Run r = Fsck(h.dir().string(), false);
  INFO(r.Text());
  CHECK(r.code == kFsckClean);
  r = Fsck(h.dir().string(), true);
  INFO(r.Text());
  CHECK(r.code == kFsckClean);
  CHECK(r.Has("(0 repairs made)"));
  h.Open();
}
