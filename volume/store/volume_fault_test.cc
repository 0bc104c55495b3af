// Fault injection: a full disk in the middle of an append, short writes, failed syncs, and
// group commit (counted through the Env).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/mutex.h"
#include "shared/status.h"
#include "volume/store/fault_env.h"
#include "volume/store/test_util.h"
#include "volume/store/volume.h"

using namespace kelp::volume;
using kelp::volume::testing::RandomBlob;
using kelp::volume::testing::TempDir;

namespace {

Volume::Options Opts(const TempDir& dir, Env* env) {
  Volume::Options o;
  o.dir = dir.path();
  o.id = 1;
  o.env = env;
  return o;
}

void CheckIntact(const Volume& v, uint64_t first, uint64_t last) {
  std::string buf;
  for (uint64_t k = first; k <= last; ++k) {
    auto n = v.Read(k, 7, &buf);
    REQUIRE(n.ok());
    REQUIRE(n->data == RandomBlob(k, 1000));
  }
}

}  // namespace

TEST_CASE("ENOSPC in the middle of a needle leaves the volume as it was") {
  TempDir dir;
  FaultEnv env;
  auto v = Volume::Create(Opts(dir, &env));
  REQUIRE(v.ok());
  for (uint64_t k = 1; k <= 10; ++k) REQUIRE((*v)->Write(k, 7, RandomBlob(k, 1000)).ok());
  const auto before = (*v)->GetStats();
  const uint64_t dat_before = testing::FileSize(dir.file("1.dat"));
  const uint64_t idx_before = testing::FileSize(dir.file("1.idx"));

  SECTION("the disk fills half-way through the .dat append") { env.SetWriteBudget(500); }
  SECTION("the disk fills exactly after the needle, before its index record") {
    env.SetWriteBudget(format::NeedleLength(1000));
  }
  SECTION("the disk fills in the middle of the index record") {
    env.SetWriteBudget(format::NeedleLength(1000) + 7);
  }
  auto w = (*v)->Write(11, 7, RandomBlob(11, 1000));
  REQUIRE_FALSE(w.ok());
  CHECK(kelp::ErrnoOf(w.status()) == ENOSPC);
  CHECK(kelp::HttpStatusOf(w.status()) == 507);

  // Nothing of the failed needle remains, everything before it is intact.
  CHECK(testing::FileSize(dir.file("1.dat")) == dat_before);
  CHECK(testing::FileSize(dir.file("1.idx")) == idx_before);
  CHECK((*v)->GetStats().size == before.size);
  CHECK((*v)->GetStats().file_count == before.file_count);
  CHECK_FALSE((*v)->SizeOf(11).has_value());
  CheckIntact(**v, 1, 10);
  // Deletes fail the same way and change nothing.
  CHECK(kelp::ErrnoOf((*v)->Delete(3, 7).status()) == ENOSPC);
  CheckIntact(**v, 1, 10);

  // Space comes back: writing resumes, and a restart sees a clean volume.
  env.SetWriteBudget(-1);
  REQUIRE((*v)->Write(11, 7, RandomBlob(11, 1000)).ok());
  v->reset();
  auto reopened = Volume::Open(Opts(dir, &env));
  REQUIRE(reopened.ok());
  CheckIntact(**reopened, 1, 11);
  CHECK((*reopened)->GetStats().file_count == 11);
  CHECK((*reopened)->checksum_failures() == 0);
}

TEST_CASE("short writes are completed, not mistaken for errors") {
  TempDir dir;
  FaultEnv env;
  env.SetMaxWriteChunk(33);
  auto v = Volume::Create(Opts(dir, &env));
  REQUIRE(v.ok());
  for (uint64_t k = 1; k <= 5; ++k) REQUIRE((*v)->Write(k, 7, RandomBlob(k, 1000)).ok());
  std::string big = RandomBlob(99, 300 << 10);  // takes the header/data/footer path
  REQUIRE((*v)->Write(6, 7, big).ok());
  CheckIntact(**v, 1, 5);
  v->reset();
  auto reopened = Volume::Open(Opts(dir, &env));
  REQUIRE(reopened.ok());
  CheckIntact(**reopened, 1, 5);
  std::string buf;
  REQUIRE((*reopened)->Read(6, 7, &buf).ok());
  CHECK(buf.substr(format::kHeaderSize, big.size()) == big);
}

TEST_CASE("a failed fdatasync fails the write and makes the volume read-only") {
  TempDir dir;
  FaultEnv env;
  auto v = Volume::Create(Opts(dir, &env));
  REQUIRE(v.ok());
  REQUIRE((*v)->Write(1, 7, RandomBlob(1, 1000), true).ok());
  env.SetSyncHook([] { return kelp::PosixError(EIO, "injected fdatasync failure"); });
  auto w = (*v)->Write(2, 7, RandomBlob(2, 1000), true);
  CHECK(kelp::ErrnoOf(w.status()) == EIO);
  CHECK((*v)->read_only());
  CHECK_FALSE((*v)->Write(3, 7, "x").ok());
  CheckIntact(**v, 1, 1);
}

TEST_CASE("group commit: concurrent fsync writes share fdatasyncs") {
  TempDir dir;
  FaultEnv env;
  auto v = Volume::Create(Opts(dir, &env));
  REQUIRE(v.ok());
  const int base_syncs = env.data_syncs();
  constexpr int kWriters = 32;
  // The first sync waits until every writer has appended, so all but the first writer must
  // be covered by one more sync (the leader took its target before the others appended).
  std::atomic<bool> first{true};
  env.SetSyncHook([&]() -> absl::Status {
    if (first.exchange(false)) {
      while ((*v)->GetStats().file_count < kWriters) std::this_thread::yield();
    }
    return absl::OkStatus();
  });
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 1; i <= kWriters; ++i) {
    threads.emplace_back([&, i] {
      if (!(*v)->Write(i, 7, RandomBlob(i, 1000), true).ok()) failures++;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  const int syncs = env.data_syncs() - base_syncs;
  INFO("fdatasyncs for " << kWriters << " durable writes: " << syncs);
  CHECK(syncs >= 1);
  CHECK(syncs <= 2);
  CheckIntact(**v, 1, kWriters);

  SECTION("a write without fsync does not sync at all") {
    int s = env.data_syncs();
    REQUIRE((*v)->Write(100, 7, "lazy").ok());
    CHECK(env.data_syncs() == s);
  }
}

TEST_CASE("Sync makes lazy writes durable with one fdatasync, and none when nothing is new") {
  TempDir dir;
  FaultEnv env;
  {
    auto v = Volume::Create(Opts(dir, &env));
    REQUIRE(v.ok());
    int s = env.data_syncs();
    for (uint64_t k = 1; k <= 20; ++k) REQUIRE((*v)->Write(k, 7, RandomBlob(k, 1000)).ok());
    CHECK(env.data_syncs() == s);
    REQUIRE((*v)->Sync().ok());
    CHECK(env.data_syncs() == s + 1);
    REQUIRE((*v)->Sync().ok());  // nothing appended since
    CHECK(env.data_syncs() == s + 1);
    REQUIRE((*v)->Write(21, 7, RandomBlob(21, 1000)).ok());
    REQUIRE((*v)->Sync().ok());
    CHECK(env.data_syncs() == s + 2);
    // Written, not synced, then the process "dies" (the volume is closed without a sync).
    REQUIRE((*v)->Write(22, 7, RandomBlob(22, 1000)).ok());
  }
  // The reopened volume cannot know whether the last process synced: its first Sync does.
  auto v = Volume::Open(Opts(dir, &env));
  REQUIRE(v.ok());
  int s = env.data_syncs();
  REQUIRE((*v)->Sync().ok());
  CHECK(env.data_syncs() == s + 1);
  REQUIRE((*v)->Sync().ok());
  CHECK(env.data_syncs() == s + 1);
  CheckIntact(**v, 1, 22);
}

TEST_CASE("an append waiting for the device to write a step behind it holds no other append up") {
  // Drop-behind: every 8 MiB appended, the step before goes out of the page cache once the
  // device wrote it. That wait ran under the append lock, so every upload to the volume
  // waited for the device behind the one append that crossed the step.
  TempDir dir;
  FaultEnv env;
  auto v = Volume::Create(Opts(dir, &env));
  REQUIRE(v.ok());
  kelp::Mutex mu;
  kelp::CondVar cv;
  bool held = false, release = false;
  env.SetDropHook([&] {
    kelp::MutexLock lock(mu);
    held = true;
    cv.NotifyAll();
    while (!release) cv.Wait(lock);
  });
  // 1 MiB needles: the one that ends the second 8 MiB step waits for the first step.
  std::atomic<uint64_t> written{0};
  std::thread appender([&] {
    for (uint64_t k = 1; k <= 20; ++k) {
      if (!(*v)->Write(k, 7, RandomBlob(k, 1 << 20)).ok()) break;
      written.store(k);
    }
  });
  {
    kelp::MutexLock lock(mu);
    while (!held) cv.Wait(lock);
  }
  const uint64_t before = written.load();
  // Another writer's append, and a delete, complete while the first one waits on the device
  // (before, they waited for it: the bounded wait below then ran out).
  bool other_done = false, other_ok = false;
  std::thread other([&] {
    bool ok = (*v)->Write(100, 7, RandomBlob(100, 4096)).ok() && (*v)->Delete(100, 7, false).ok();
    kelp::MutexLock lock(mu);
    other_ok = ok;
    other_done = true;
    cv.NotifyAll();
  });
  {
    kelp::MutexLock lock(mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!other_done && cv.WaitUntil(lock, deadline)) {
    }
    CHECK(other_done);
    CHECK(other_ok);
    CHECK(written.load() == before);  // the appender is still held
    release = true;
    cv.NotifyAll();
  }
  env.SetDropHook(nullptr);
  other.join();
  appender.join();
  REQUIRE(written.load() == 20);
  std::string buf;
  for (uint64_t k = 1; k <= 20; ++k) {
    auto n = (*v)->Read(k, 7, &buf);
    REQUIRE(n.ok());
    REQUIRE(n->data == RandomBlob(k, 1 << 20));
  }
}
