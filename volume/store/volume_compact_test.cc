// Vacuum: correctness alone, with writes forced into each phase, under concurrent load, and
// after a crash in the middle.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/status.h"
#include "volume/store/test_util.h"
#include "volume/store/volume.h"

using namespace kelp::volume;
using kelp::volume::testing::RandomBlob;
using kelp::volume::testing::TempDir;

namespace {

Volume::Options Opts(const TempDir& dir) {
  Volume::Options o;
  o.dir = dir.path();
  o.id = 4;
  o.collection = "c";
  return o;
}

// Each blob says which key and version it is, so a reader can tell a right answer from a
// plausible wrong one.
std::string Blob(uint64_t key, uint64_t version) {
  return "k" + std::to_string(key) + "v" + std::to_string(version) + "|" +
         RandomBlob(key * 1000 + version, 200 + key % 700);
}
bool IsSomeVersionOf(std::string_view data, uint64_t key) {
  std::string prefix = "k" + std::to_string(key) + "v";
  if (data.substr(0, prefix.size()) != prefix) return false;
  size_t bar = data.find('|');
  if (bar == std::string_view::npos) return false;
  uint64_t version = std::stoull(std::string(data.substr(prefix.size(), bar - prefix.size())));
  return data == Blob(key, version);
}
uint32_t Cookie(uint64_t key) { return static_cast<uint32_t>(key * 31 + 5); }

bool ReadsAs(const Volume& v, uint64_t key, const std::string& want) {
  std::string buf;
  auto n = v.Read(key, Cookie(key), &buf);
  return n.ok() && n->data == want;
}
bool Absent(const Volume& v, uint64_t key) {
  std::string buf;
  return kelp::ErrnoOf(v.Read(key, Cookie(key), &buf).status()) == ENOENT;
}

}  // namespace

TEST_CASE("vacuum drops deleted and overwritten needles and keeps the rest") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  for (uint64_t k = 1; k <= 200; ++k) REQUIRE((*v)->Write(k, Cookie(k), Blob(k, 0)).ok());
  for (uint64_t k = 1; k <= 200; k += 2) REQUIRE((*v)->Delete(k, Cookie(k)).ok());
  for (uint64_t k = 2; k <= 40; k += 2) REQUIRE((*v)->Write(k, Cookie(k), Blob(k, 1)).ok());
  const uint64_t before = testing::FileSize(dir.file("c_4.dat"));
  CHECK((*v)->GarbageRatio() > 0.5);

  auto r = (*v)->Compact();
  REQUIRE(r.ok());
  CHECK(r->size_before == before);
  const uint64_t after = testing::FileSize(dir.file("c_4.dat"));
  CHECK(after == r->size_after);
  CHECK(after < before / 2);
  CHECK((*v)->GarbageRatio() == 0.0);
  CHECK((*v)->GetStats().delete_count == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("c_4.cpd")));
  CHECK_FALSE(std::filesystem::exists(dir.file("c_4.cpx")));

  auto check = [&](const Volume& vol) {
    for (uint64_t k = 1; k <= 200; ++k) {
      INFO("key " << k);
      if (k % 2 == 1) {
        CHECK(Absent(vol, k));
      } else {
        CHECK(ReadsAs(vol, k, Blob(k, k <= 40 ? 1 : 0)));
      }
    }
  };
  check(**v);
  CHECK((*v)->GetStats().file_count == 100);
  REQUIRE((*v)->Write(1000, Cookie(1000), Blob(1000, 0)).ok());
  v->reset();
  auto reopened = Volume::Open(Opts(dir));
  REQUIRE(reopened.ok());
  check(**reopened);
  CHECK(ReadsAs(**reopened, 1000, Blob(1000, 0)));
}

TEST_CASE("writes and deletes made during each vacuum phase are carried over") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  Volume& vol = **v;
  for (uint64_t k = 1; k <= 100; ++k) REQUIRE(vol.Write(k, Cookie(k), Blob(k, 0)).ok());
  for (uint64_t k = 1; k <= 50; ++k) REQUIRE(vol.Delete(k, Cookie(k)).ok());

  // A reader holding a handle from before the switch must still read the old bytes.
  auto old_handle = vol.Find(60);
  REQUIRE(old_handle.has_value());

  Volume::CompactHooks hooks;
  hooks.after_copy = [&] {  // caught up without the lock
    REQUIRE(vol.Write(101, Cookie(101), Blob(101, 0)).ok());
    REQUIRE(vol.Write(60, Cookie(60), Blob(60, 1)).ok());
    REQUIRE(vol.Delete(70, Cookie(70)).ok());
  };
  hooks.after_catchup = [&] {  // caught up under the lock, at the switch
    REQUIRE(vol.Write(102, Cookie(102), Blob(102, 0)).ok());
    REQUIRE(vol.Write(61, Cookie(61), Blob(61, 1)).ok());
    REQUIRE(vol.Delete(71, Cookie(71)).ok());
    REQUIRE(vol.Delete(101, Cookie(101)).ok());
  };
  REQUIRE(vol.Compact(&hooks).ok());

  auto check = [&](const Volume& x) {
    CHECK(Absent(x, 25));
    CHECK(Absent(x, 70));
    CHECK(Absent(x, 71));
    CHECK(Absent(x, 101));
    CHECK(ReadsAs(x, 60, Blob(60, 1)));
    CHECK(ReadsAs(x, 61, Blob(61, 1)));
    CHECK(ReadsAs(x, 62, Blob(62, 0)));
    CHECK(ReadsAs(x, 102, Blob(102, 0)));
    CHECK(x.GetStats().file_count == 49);
  };
  check(vol);
  auto n = vol.Verify(*old_handle, Cookie(60));
  REQUIRE(n.ok());  // the replaced file is still readable through the old handle
  v->reset();
  auto reopened = Volume::Open(Opts(dir));
  REQUIRE(reopened.ok());
  check(**reopened);
}

TEST_CASE("vacuum under concurrent reads, writes and deletes") {
  TempDir dir;
  auto v = Volume::Create(Opts(dir));
  REQUIRE(v.ok());
  Volume& vol = **v;
  constexpr uint64_t kKeys = 2000;
  // Expected content per key: version >= 0 live, -1 deleted. Writers own disjoint key ranges.
  std::vector<int> version(kKeys + 1, 0);
  for (uint64_t k = 1; k <= kKeys; ++k) REQUIRE(vol.Write(k, Cookie(k), Blob(k, 0)).ok());
  for (uint64_t k = 1; k <= kKeys; k += 3) {
    REQUIRE(vol.Delete(k, Cookie(k)).ok());
    version[k] = -1;
  }
  const uint64_t size_before = vol.GetStats().size;

  std::atomic<bool> stop{false};
  std::atomic<int> bad_reads{0}, reads{0}, write_errors{0};
  std::vector<std::thread> threads;
  constexpr int kWriters = 2;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      while (!stop) {
        uint64_t k = 1 + (rng() % (kKeys / kWriters)) * kWriters + w;
        if (k > kKeys) continue;
        if (version[k] >= 0 && rng() % 4 == 0) {
          if (!vol.Delete(k, Cookie(k)).ok()) write_errors++;
          version[k] = -1;
        } else {
          int next = version[k] < 0 ? 10 : version[k] + 1;
          if (!vol.Write(k, Cookie(k), Blob(k, next)).ok()) write_errors++;
          version[k] = next;
        }
      }
    });
  }
  // Readers check that whatever they read is a complete version of that key.
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      std::string buf;
      while (!stop) {
        uint64_t k = 1 + rng() % kKeys;
        auto n = vol.Read(k, Cookie(k), &buf);
        if (n.ok()) {
          reads++;
          if (!IsSomeVersionOf(n->data, k)) bad_reads++;
        } else if (kelp::ErrnoOf(n.status()) != ENOENT) {
          bad_reads++;
        }
      }
    });
  }
  // The vacuums start once the readers are reading (on a loaded machine they may not have
  // run at all during three quick vacuums otherwise); bounded, so a stuck reader fails below.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reads.load() < 100 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  for (int i = 0; i < 3; ++i) {
    auto r = vol.Compact();
    REQUIRE(r.ok());
  }
  stop = true;
  for (auto& t : threads) t.join();
  CHECK(bad_reads == 0);
  CHECK(write_errors == 0);
  CHECK(reads > 0);

  auto check = [&](const Volume& x) {
    for (uint64_t k = 1; k <= kKeys; ++k) {
      INFO("key " << k << " version " << version[k]);
      if (version[k] < 0) {
        REQUIRE(Absent(x, k));
      } else {
        REQUIRE(ReadsAs(x, k, Blob(k, version[k])));
      }
    }
  };
  check(vol);
  REQUIRE(vol.Compact().ok());
  CHECK(vol.GetStats().size < size_before);
  v->reset();
  auto reopened = Volume::Open(Opts(dir));
  REQUIRE(reopened.ok());
  check(**reopened);
}

TEST_CASE("a vacuum interrupted by a crash is rolled back or finished at start-up") {
  TempDir dir;
  {
    auto v = Volume::Create(Opts(dir));
    REQUIRE(v.ok());
    for (uint64_t k = 1; k <= 20; ++k) REQUIRE((*v)->Write(k, Cookie(k), Blob(k, 0)).ok());
    for (uint64_t k = 1; k <= 10; ++k) REQUIRE((*v)->Delete(k, Cookie(k)).ok());
  }
  SECTION("crash while copying: leftovers are removed") {
    std::filesystem::copy_file(dir.file("c_4.dat"), dir.file("c_4.cpd"));
    std::ofstream(dir.file("c_4.cpx")) << "partial";
  }
  SECTION("crash between the two renames: the new index is installed") {
    // Simulate by vacuuming a copy, then putting its .dat in place with its .idx as .cpx.
    TempDir other;
    std::filesystem::copy_file(dir.file("c_4.dat"), other.file("c_4.dat"));
    std::filesystem::copy_file(dir.file("c_4.idx"), other.file("c_4.idx"));
    Volume::Options o = Opts(dir);
    o.dir = other.path();
    {
      auto v = Volume::Open(o);
      REQUIRE(v.ok());
      REQUIRE((*v)->Compact().ok());
    }
    std::filesystem::copy_file(other.file("c_4.dat"), dir.file("c_4.dat"),
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(other.file("c_4.idx"), dir.file("c_4.cpx"));
  }
  auto v = Volume::Open(Opts(dir));
  REQUIRE(v.ok());
  CHECK_FALSE(std::filesystem::exists(dir.file("c_4.cpd")));
  CHECK_FALSE(std::filesystem::exists(dir.file("c_4.cpx")));
  for (uint64_t k = 1; k <= 20; ++k) {
    if (k <= 10) {
      CHECK(Absent(**v, k));
    } else {
      CHECK(ReadsAs(**v, k, Blob(k, 0)));
    }
  }
}
