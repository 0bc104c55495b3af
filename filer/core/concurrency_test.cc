#include <sys/stat.h>

#include <random>
#include <set>
#include <thread>

#include "filer/client/limits.h"
#include "filer/core/test_util.h"
#include "shared/mutex.h"

using namespace kelp::filer;
using namespace kelp::filer::testing;

TEST_CASE("concurrent creates in one directory lose nothing") {
  Harness h(KELP_BACKENDS);
  uint64_t d = h.Mkdir(1, "shared");
  const int threads = 8, files = 200, dirs = 25;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < files + dirs; ++i) {
        CreateArgs a;
        a.parent = d;
        a.name = "t" + std::to_string(t) + "-" + std::to_string(i);
        a.mode = (i < files ? S_IFREG : S_IFDIR) | 0644;
        a.exclusive = true;
        if (!h.fs->Create(a).ok()) ++failures;
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(failures == 0);
  CHECK(h.Names(d).size() == threads * (files + dirs));
  CHECK(h.fs->GetAttr(d)->nlink() == 2 + threads * dirs);
  CHECK(h.fs->InodeCount() == 2 + threads * (files + dirs));
  h.RequireConsistent();
}

TEST_CASE("random concurrent mutations keep dentries, inodes and nlink consistent") {
  Harness h(KELP_BACKENDS);
  std::vector<uint64_t> shared = {1, h.Mkdir(1, "s0"), h.Mkdir(1, "s1"), h.Mkdir(1, "s2")};
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  const std::set<int> expected = {ENOENT, EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, EINVAL, EPERM};
  std::atomic<int> unexpected{0}, ok{0};
  kelp::Mutex mu;
  std::vector<std::string> surprises;  // Catch2 is not thread-safe: report after the join
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
      // A parent: one of the fixed directories, or a directory found inside one (which may
      // move or vanish under us: that is the point).
      auto parent = [&]() -> uint64_t {
        uint64_t p = pick(shared);
        if (rng() % 3 == 0) {
          auto a = h.fs->Lookup(p, pick(names));
          if (a.ok() && S_ISDIR(a->mode())) return a->ino();
        }
        return p;
      };
      for (int i = 0; i < 1200; ++i) {
        absl::Status s;
        switch (rng() % 8) {
          case 0:
          case 1: {
            CreateArgs a;
            a.parent = parent();
            a.name = pick(names);
            a.mode = (rng() % 2 ? S_IFDIR : S_IFREG) | 0755;
            a.exclusive = true;
            s = h.fs->Create(a).status();
            break;
          }
          case 2: s = h.fs->Unlink(parent(), pick(names)).status(); break;
          case 3: s = h.fs->Rmdir(parent(), pick(names)); break;
          case 4: {
            auto a = h.fs->Lookup(parent(), pick(names));
            s = a.ok() ? h.fs->Link(a->ino(), parent(), pick(names)).status() : a.status();
            break;
          }
          default: {
            uint32_t flags = rng() % 4 == 0 ? kRenameExchange : (rng() % 4 == 0 ? kRenameNoReplace : 0);
            s = h.fs->Rename(parent(), pick(names), parent(), pick(names), flags).status();
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
  for (auto& t : ts) t.join();
  for (const auto& s : surprises) UNSCOPED_INFO(s);
  CHECK(unexpected == 0);
  CHECK(ok > 1000);
  h.RequireConsistent();
  CHECK(h.fs->InodeCount() == static_cast<int64_t>(CheckNamespace(*h.kv)->inodes));
}

TEST_CASE("concurrent cross-directory renames never build a cycle") {
  Harness h(KELP_BACKENDS);
  uint64_t a = h.Mkdir(1, "a");
  uint64_t b = h.Mkdir(1, "b");
  CHECK(CrossingMoves(*h.fs, *h.fs, a, b, 300) > 0);
  h.RequireConsistent();
}
