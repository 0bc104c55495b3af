// Several filers on one store (issue 15, part 2): two FilerServices share one store, on the
// in-memory store that validates transactions and on a real PostgreSQL (started by the test),
// and do the same read-check-writes at the same time. Nothing may be lost or duplicated, and
// the namespace must check clean.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "filer/client/limits.h"
#include "filer/core/test_util.h"
#include "filer/store/copy.h"
#include "filer/store/pg_kv_store.h"
#include "filer/store/testing/pg_test_server.h"
#include "shared/mutex.h"
#include "shared/strings.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;
using namespace std::chrono_literals;

namespace {

PgTestServer& Pg() { return kelp::filer::testing::SharedPgTestServer(); }

// Two filers on one store: each with its own store handle (for PostgreSQL its own
// connections, as two processes would have), its own locks, sequences and event log.
class TwoFilers {
 public:
  // own_clock_a: filer a keeps a clock of its own that nobody advances (a filer that stalled).
  explicit TwoFilers(const std::string& backend, bool own_clock_a = false) : backend_(backend) {
    opts_ = TestOptions(&clock);
    opts_a_ = opts_;
    if (own_clock_a) opts_a_.clock = &stalled_clock;
    if (backend == "postgres") {
      static int n = 0;
      keyspace_ = kelp::StrCat("multi", ++n);
      for (int i = 0; i < 2; ++i) stores_.push_back(OpenPg());
    } else {
      shared_ = NewMemoryKvStore(true);
    }
    a = Start(0);
    b = Start(1);
  }
  ~TwoFilers() {
    a.reset();
    b.reset();
  }

  KvStore& kv(int i) { return backend_ == "postgres" ? *stores_[i] : *shared_; }
  FilerService& fs(int i) { return i == 0 ? *a : *b; }

  // Lets both filers' event ranges age out and each learn what the other has open.
  void SettleEvents() {
    clock.Advance(opts_.event_range_life + 1ms);
    for (int round = 0; round < 2; ++round) {
      REQUIRE(a->events().Poll().ok());
      REQUIRE(b->events().Poll().ok());
    }
  }

  void RequireConsistent() {
    auto r = CheckNamespace(kv(0));
    REQUIRE(r.ok());
    INFO(r->Summary());
    REQUIRE(r->ok());
  }

  std::vector<std::string> Names(int i, uint64_t dir) {
    std::vector<std::string> out;
    REQUIRE(fs(i).ReadDir(dir, 0, 0, false, [&](DirEntry&& e) {
                   out.push_back(e.name());
                   return true;
                 }).ok());
    return out;
  }

  FakeClock clock;
  FakeClock stalled_clock;
  FakeCluster cluster;
  std::unique_ptr<FilerService> a, b;

 private:
  std::unique_ptr<KvStore> OpenPg() {
    PgKvOptions o;
    o.dsn = Pg().dsn();
    o.keyspace = keyspace_;
    o.connections = 8;
    auto kv = OpenPgKvStore(o);
    REQUIRE(kv.ok());
    return std::move(*kv);
  }
  std::unique_ptr<FilerService> Start(int i) {
    auto fs = std::make_unique<FilerService>(&kv(i), &cluster, i == 0 ? opts_a_ : opts_);
    auto s = fs->Start();
    INFO(s.ToString());
    REQUIRE(s.ok());
    return fs;
  }

  std::string backend_;
  std::string keyspace_;
  FilerOptions opts_, opts_a_;
  std::unique_ptr<KvStore> shared_;
  std::vector<std::unique_ptr<KvStore>> stores_;
};

#define MULTI_BACKENDS GENERATE(as<std::string>{}, "shared", "postgres")

CreateArgs File(uint64_t parent, std::string name, bool dir = false) {
  CreateArgs a;
  a.parent = parent;
  a.name = std::move(name);
  a.mode = (dir ? S_IFDIR : S_IFREG) | 0644;
  a.exclusive = true;
  return a;
}

}  // namespace

TEST_CASE("two filers: concurrent creates in one directory lose nothing, inode numbers never repeat") {
  TwoFilers t(MULTI_BACKENDS);
  uint64_t d = t.a->Create(File(1, "shared", true))->ino();
  const int threads = 4, files = 60, dirs = 10;
  std::vector<std::thread> ts;
  kelp::Mutex mu;
  std::vector<std::string> errors;
  std::set<uint64_t> inos;
  for (int th = 0; th < threads; ++th) {
    ts.emplace_back([&, th] {
      FilerService& fs = t.fs(th % 2);
      for (int i = 0; i < files + dirs; ++i) {
        auto r = fs.Create(File(d, kelp::StrCat("t", th, "-", i), i >= files));
        kelp::MutexLock lock(mu);
        if (!r.ok()) {
          errors.push_back(r.status().ToString());
        } else if (!inos.insert(r->ino()).second) {
          errors.push_back(kelp::StrCat("inode ", r->ino(), " handed out twice"));
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
  CHECK(t.Names(0, d).size() == threads * (files + dirs));
  CHECK(t.Names(1, d).size() == threads * (files + dirs));
  CHECK(t.b->GetAttr(d)->nlink() == 2 + threads * dirs);
  CHECK(t.a->InodeCount() == 2 + threads * (files + dirs));
  t.RequireConsistent();
}

TEST_CASE("two filers: one name created from both sides at once exists once") {
  TwoFilers t(MULTI_BACKENDS);
  std::atomic<int> won{0}, exists{0}, other{0};
  for (int round = 0; round < 40; ++round) {
    std::string name = kelp::StrCat("n", round);
    std::thread x([&] {
      auto r = t.a->Create(File(1, name, round % 2 == 0));
      r.ok() ? ++won : (kelp::ErrnoOf(r.status()) == EEXIST ? ++exists : ++other);
    });
    auto r = t.b->Create(File(1, name, round % 2 == 0));
    r.ok() ? ++won : (kelp::ErrnoOf(r.status()) == EEXIST ? ++exists : ++other);
    x.join();
  }
  CHECK(won == 40);
  CHECK(exists == 40);
  CHECK(other == 0);
  CHECK(t.Names(0, 1).size() == 40);
  t.RequireConsistent();
}

TEST_CASE("two filers: random concurrent mutations keep dentries, inodes and nlink consistent") {
  TwoFilers t(MULTI_BACKENDS);
  std::vector<uint64_t> shared = {1};
  for (int i = 0; i < 3; ++i) shared.push_back(t.a->Create(File(1, kelp::StrCat("s", i), true))->ino());
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  const std::set<int> expected = {ENOENT, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, EINVAL, EPERM};
  std::atomic<int> unexpected{0}, ok{0};
  kelp::Mutex mu;
  std::vector<std::string> surprises;
  std::vector<std::thread> ts;
  const int per_thread = 200;
  for (int th = 0; th < 4; ++th) {
    ts.emplace_back([&, th] {
      FilerService& fs = t.fs(th % 2);
      std::mt19937 rng(4321 + th);
      auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
      auto parent = [&]() -> uint64_t {
        uint64_t p = pick(shared);
        if (rng() % 3 == 0) {
          auto a = fs.Lookup(p, pick(names));
          if (a.ok() && S_ISDIR(a->mode())) return a->ino();
        }
        return p;
      };
      for (int i = 0; i < per_thread; ++i) {
        absl::Status s;
        switch (rng() % 8) {
          case 0:
          case 1: s = fs.Create(File(parent(), pick(names), rng() % 2)).status(); break;
          case 2: s = fs.Unlink(parent(), pick(names)).status(); break;
          case 3: s = fs.Rmdir(parent(), pick(names)); break;
          case 4: {
            auto a = fs.Lookup(parent(), pick(names));
            s = a.ok() ? fs.Link(a->ino(), parent(), pick(names)).status() : a.status();
            break;
          }
          default: {
            uint32_t flags = rng() % 4 == 0 ? kRenameExchange : (rng() % 4 == 0 ? kRenameNoReplace : 0);
            s = fs.Rename(parent(), pick(names), parent(), pick(names), flags).status();
            break;
          }
        }
        if (s.ok()) {
          ++ok;
        } else if (!expected.count(kelp::ErrnoOf(s))) {
          ++unexpected;
          kelp::MutexLock lock(mu);
          surprises.push_back(s.ToString());
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  for (const auto& s : surprises) UNSCOPED_INFO(s);
  CHECK(unexpected == 0);
  // The workload did real work: how much of it succeeds depends on the interleaving (194 to
  // 300-odd of the 800 in runs seen), so the bound only rules out "almost everything failed".
  CHECK(ok > per_thread / 2);
  t.RequireConsistent();
  CHECK(t.a->InodeCount() == static_cast<int64_t>(CheckNamespace(t.kv(0))->inodes));
}

TEST_CASE("two filers: crossing directory moves never build a cycle") {
  TwoFilers t(MULTI_BACKENDS);
  uint64_t a = t.a->Create(File(1, "a", true))->ino();
  uint64_t b = t.a->Create(File(1, "b", true))->ino();
  CHECK(CrossingMoves(*t.a, *t.b, a, b, 60) > 0);
  t.RequireConsistent();
}

TEST_CASE("two filers: rmdir through one and create inside through the other never both win") {
  TwoFilers t(MULTI_BACKENDS);
  int both = 0, rmdir_won = 0, create_won = 0;
  for (int round = 0; round < 30; ++round) {
    std::string name = kelp::StrCat("d", round);
    uint64_t d = t.a->Create(File(1, name, true))->ino();
    absl::Status rm, cr;
    std::thread x([&] { rm = t.a->Rmdir(1, name); });
    cr = t.b->Create(File(d, "child")).status();
    x.join();
    both += rm.ok() && cr.ok();
    rmdir_won += rm.ok();
    create_won += cr.ok();
    if (!rm.ok()) CHECK(kelp::ErrnoOf(rm) == ENOTEMPTY);
    if (!cr.ok()) CHECK(kelp::ErrnoOf(cr) == ENOENT);
  }
  CHECK(both == 0);
  CHECK(rmdir_won + create_won == 30);
  t.RequireConsistent();
}

TEST_CASE("two filers: links and unlinks of one inode from both sides keep nlink exact") {
  TwoFilers t(MULTI_BACKENDS);
  uint64_t f = t.a->Create(File(1, "f"))->ino();
  std::atomic<int> linked{0};
  std::thread x([&] {
    for (int i = 0; i < 25; ++i) linked += t.a->Link(f, 1, kelp::StrCat("a", i)).ok();
  });
  for (int i = 0; i < 25; ++i) linked += t.b->Link(f, 1, kelp::StrCat("b", i)).ok();
  x.join();
  CHECK(linked == 50);
  CHECK(t.b->GetAttr(f)->nlink() == 51);
  std::thread y([&] {
    for (int i = 0; i < 25; ++i) (void)t.a->Unlink(1, kelp::StrCat("b", i));
  });
  for (int i = 0; i < 25; ++i) (void)t.b->Unlink(1, kelp::StrCat("a", i));
  y.join();
  CHECK(t.a->GetAttr(f)->nlink() == 1);
  t.RequireConsistent();
}

TEST_CASE("two filers: a file open through one is kept when unlinked through the other") {
  TwoFilers t(MULTI_BACKENDS);
  std::string s = t.a->OpenSession("mount-on-a")->session();
  CreateArgs c = File(1, "f");
  c.session = s;
  c.open_handle = true;
  uint64_t f = t.a->Create(c)->ino();
  REQUIRE(t.b->Unlink(1, "f").ok());
  CHECK(t.b->GetAttr(f).ok());  // an orphan, still readable
  t.b->RunMaintenance();
  CHECK(t.a->GetAttr(f).ok());
  // The client moves to the other filer: its session and opens are there too.
  REQUIRE(t.b->KeepAlive(s, {}, false).ok());
  REQUIRE(t.b->Release(s, f).ok());
  CHECK(kelp::ErrnoOf(t.a->GetAttr(f).status()) == ENOENT);
  t.RequireConsistent();
}

TEST_CASE("two filers: chunk seqs grow per file whichever filer commits") {
  TwoFilers t(MULTI_BACKENDS);
  uint64_t f = t.a->Create(File(1, "f"))->ino();
  uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    CommitChunksRequest c;
    c.set_ino(f);
    *c.add_chunks() = MakeChunk(Fid(100 + i), 0, 10);  // each overwrites the last
    auto r = t.fs(i % 2).CommitChunks(c);
    REQUIRE(r.ok());
    CHECK(r->seqs(0) > last);
    last = r->seqs(0);
  }
  auto chunks = t.b->GetChunks(f);
  REQUIRE(chunks.ok());
  // The newest write wins on read: its seq is the highest.
  uint64_t best = 0;
  std::string fid;
  for (const auto& c : chunks->chunks()) {
    if (c.seq() > best) best = c.seq(), fid = c.fid();
  }
  CHECK(fid == Fid(105));
}

TEST_CASE("two filers: each filer's event stream carries the other's mutations") {
  TwoFilers t(MULTI_BACKENDS);
  auto sub_a = t.a->Subscribe(0, "");
  auto sub_b = t.b->Subscribe(0, "");
  REQUIRE(sub_a.ok());
  REQUIRE(sub_b.ok());
  uint64_t d = t.a->Create(File(1, "from-a", true))->ino();
  REQUIRE(t.b->Create(File(d, "from-b")).ok());
  REQUIRE(t.a->Rename(d, "from-b", 1, "moved-by-a", 0).ok());
  t.SettleEvents();
  for (auto* sub : {&*sub_a, &*sub_b}) {
    std::vector<std::string> seen;
    uint64_t prev = 0;
    for (int i = 0; i < 10 && seen.size() < 3; ++i) {
      auto batch = (*sub)->Next(100, 10ms);
      REQUIRE(batch.ok());
      for (const auto& e : *batch) {
        CHECK(e.seq() > prev);
        prev = e.seq();
        seen.push_back(e.kind() == EVENT_RENAME ? "rename " + e.new_name() : e.name());
      }
    }
    // In seq order; across filers seq order need not be wall-time order (a's rename may
    // come before b's create: each filer numbers from its own range), which invalidation
    // does not mind. Within one filer it is.
    auto at = [&](const std::string& n) { return std::find(seen.begin(), seen.end(), n) - seen.begin(); };
    CHECK(at("from-a") < at("rename moved-by-a"));
    std::sort(seen.begin(), seen.end());
    CHECK(seen == std::vector<std::string>{"from-a", "from-b", "rename moved-by-a"});
  }
}

TEST_CASE("two filers: a range left open by a filer that stalled is revoked, and events flow again") {
  TwoFilers t(MULTI_BACKENDS, /*own_clock_a=*/true);
  auto sub = t.b->Subscribe(0, "");
  REQUIRE(sub.ok());
  REQUIRE(t.a->Create(File(1, "before")).ok());
  // Filer a stalls holding its range open: it does not poll, its clock stands still.
  REQUIRE(t.b->Create(File(1, "after")).ok());
  t.clock.Advance(1ms);
  REQUIRE(t.b->events().Poll().ok());
  // b's own event waits behind a's open range...
  CHECK((*sub)->Next(10, 1ms)->empty());
  // ...until a's lease runs out and b revokes it.
  t.clock.Advance(6s);
  REQUIRE(t.b->events().Poll().ok());
  REQUIRE(t.b->events().Poll().ok());
  std::vector<std::string> names;
  for (int i = 0; i < 5 && names.size() < 2; ++i) {
    auto batch = (*sub)->Next(10, 1ms);
    REQUIRE(batch.ok());
    for (const auto& e : *batch) names.push_back(e.name());
  }
  CHECK(names == std::vector<std::string>{"before", "after"});
  // The stalled filer wakes up: its next write, still on the revoked range, conflicts, takes
  // a new range and succeeds; readers see it after the ones before.
  uint64_t retries = t.a->txn_retries();
  REQUIRE(t.a->Create(File(1, "late")).ok());
  CHECK(t.a->txn_retries() == retries + 1);
  t.clock.Advance(1s);
  t.stalled_clock.Advance(1s);
  REQUIRE(t.a->events().Poll().ok());
  REQUIRE(t.b->events().Poll().ok());
  auto late = (*sub)->Next(10, 1ms);
  REQUIRE(late.ok());
  REQUIRE(late->size() == 1);
  CHECK((*late)[0].name() == "late");
}

TEST_CASE("a namespace copied RocksDB -> PostgreSQL -> RocksDB is the same namespace, and a filer serves it") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / kelp::StrCat("kelp-copy-", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  FakeClock clock;
  FakeCluster cluster;
  FilerOptions opts = TestOptions(&clock);
  uint64_t f = 0;
  {
    auto rocks = OpenRocksKvStore((dir / "a").string());
    REQUIRE(rocks.ok());
    FilerService fs(rocks->get(), &cluster, opts);
    REQUIRE(fs.Start().ok());
    uint64_t d = fs.Create(File(1, "dir", true))->ino();
    f = fs.Create(File(d, "file"))->ino();
    CommitChunksRequest c;
    c.set_ino(f);
    *c.add_chunks() = MakeChunk(Fid(7), 0, 100);
    REQUIRE(fs.CommitChunks(c).ok());
    REQUIRE(fs.SetXattr(f, "user.k", "v", 0).ok());
    REQUIRE(fs.Link(f, 1, "hard").ok());
    fs.Stop();
  }
  PgKvOptions po;
  po.dsn = Pg().dsn();
  po.keyspace = "copied";
  {
    auto from = OpenRocksKvStore((dir / "a").string());
    auto to = OpenPgKvStore(po);
    REQUIRE(from.ok());
    REQUIRE(to.ok());
    auto r = CopyStore(**from, **to, {});
    REQUIRE(r.ok());
    CHECK(r->keys > 10);
    // Copying into a store that holds a namespace is refused.
    CHECK(CopyStore(**from, **to, {}).status().code() == absl::StatusCode::kFailedPrecondition);
    auto check = CheckNamespace(**to);
    REQUIRE(check.ok());
    CHECK(check->ok());
    CHECK(check->inodes == 3);
  }
  {
    // A filer on the copy sees everything, and writes on.
    auto pg = OpenPgKvStore(po);
    REQUIRE(pg.ok());
    FilerService fs(pg->get(), &cluster, opts);
    REQUIRE(fs.Start().ok());
    auto a = fs.ResolvePath("/dir/file");
    REQUIRE(a.ok());
    CHECK(a->ino() == f);
    CHECK(a->nlink() == 2);
    CHECK(*fs.GetXattr(f, "user.k") == "v");
    CHECK(fs.GetChunks(f)->chunks(0).fid() == Fid(7));
    uint64_t g = fs.Create(File(1, "new"))->ino();
    CHECK(g > f);  // inode numbers continue above the copied ones
    fs.Stop();
  }
  {
    auto from = OpenPgKvStore(po);
    auto to = OpenRocksKvStore((dir / "b").string());
    REQUIRE(from.ok());
    REQUIRE(to.ok());
    auto r = CopyStore(**from, **to, {});
    REQUIRE(r.ok());
    auto check = CheckNamespace(**to);
    REQUIRE(check.ok());
    CHECK(check->ok());
    CHECK(check->inodes == 4);
  }
  fs::remove_all(dir);
}
