// Test scaffolding for filer/core: a fake ClusterApi, a store wrapper that counts what each
// batch writes, and a harness that runs a FilerService on the memory or the RocksDB store
// and can restart it. Tests only.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "filer/core/clock.h"
#include "filer/core/consistency_check.h"
#include "filer/core/filer_service.h"
#include "filer/store/kv_store.h"
#include "shared/file_id.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/testing/temp_dir.h"

namespace kelp::filer::testing {

// A fid for tests: volume 1, key n.
inline std::string Fid(uint64_t n) { return FileId{1, n, 0x1234abcd}.ToString(); }

inline Chunk MakeChunk(const std::string& fid, uint64_t offset, uint64_t size,
                       uint64_t blob_offset = 0) {
  Chunk c;
  c.set_fid(fid);
  c.set_offset(offset);
  c.set_size(size);
  c.set_blob_offset(blob_offset);
  return c;
}

// Polls pred every 10 ms until it holds or the timeout passes (for results of background
// threads; orderings between threads are forced with hooks, not with this).
template <typename Pred>
bool WaitForCondition(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class FakeCluster : public ClusterApi {
 public:
  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest& req) override {
    MutexLock lock(mu_);
    cluster::AssignResponse r;
    r.set_fid(Fid(++next_key_));
    r.set_count(req.count() == 0 ? 1 : req.count());
    next_key_ += r.count() - 1;
    auto* loc = r.add_locations();
    loc->set_url("127.0.0.1:8080");
    loc->set_public_url("127.0.0.1:8080");
    return r;
  }
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(
      const cluster::LookupVolumeRequest& req) override {
    cluster::LookupVolumeResponse r;
    for (uint32_t vid : req.volume_ids()) {
      auto* v = r.add_volumes();
      v->set_volume_id(vid);
      if (vid == 1) {
        v->add_locations()->set_url("127.0.0.1:8080");
      } else {
        v->set_error("volume not found");
      }
    }
    return r;
  }
  Capacity GetCapacity() override { return {1ULL << 40, 1ULL << 39}; }
  std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) override {
    std::vector<absl::Status> out;
    {
      MutexLock lock(mu_);
      ++delete_calls_;
      for (const auto& f : fids) {
        if (fail_) {
          out.push_back(absl::UnavailableError("volume server down"));
        } else {
          deleted_.push_back(f);
          out.push_back(absl::OkStatus());
        }
      }
    }
    cv_.NotifyAll();
    return out;
  }

  void SetFail(bool fail) {
    MutexLock lock(mu_);
    fail_ = fail;
  }
  std::vector<std::string> deleted() {
    MutexLock lock(mu_);
    return deleted_;
  }
  int delete_calls() {
    MutexLock lock(mu_);
    return delete_calls_;
  }
  // Waits (without polling) until fid was deleted.
  bool WaitDeleted(const std::string& fid, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(mu_);
    auto deleted = [&] { return std::find(deleted_.begin(), deleted_.end(), fid) != deleted_.end(); };
    while (!deleted() && cv_.WaitUntil(lock, deadline)) {
    }
    return deleted();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  uint64_t next_key_ = 1000;
  bool fail_ = false;
  std::vector<std::string> deleted_;
  int delete_calls_ = 0;
};

// Forwards to a store and remembers the size of the last batch written; fail_commit, when
// set, may refuse a batch (a conflict, a full disk) before it reaches the store.
class CountingKvStore;
class CountingTxn : public KvTxn {
 public:
  CountingTxn(CountingKvStore* owner, std::unique_ptr<KvTxn> base) : owner_(owner), base_(std::move(base)) {}
  absl::StatusOr<std::string> Get(std::string_view key) override { return base_->Get(key); }
  using KvTxn::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end, size_t limit) override {
    return base_->Scan(begin, end, limit);
  }
  absl::StatusOr<uint64_t> Count(std::string_view begin, std::string_view end) override {
    return base_->Count(begin, end);
  }
  absl::Status Commit(const WriteBatch& batch, bool sync) override;

 private:
  CountingKvStore* owner_;
  std::unique_ptr<KvTxn> base_;
};

class CountingKvStore : public KvStore {
 public:
  explicit CountingKvStore(KvStore* base) : base_(base) {}
  absl::StatusOr<std::string> Get(std::string_view key) override { return base_->Get(key); }
  // Puts and deletes only (a batch may also carry Require checks).
  static size_t Writes(const WriteBatch& batch) {
    size_t n = 0;
    for (const auto& op : batch.ops()) n += op.kind != WriteBatch::Op::kRequire;
    return n;
  }
  absl::Status Write(const WriteBatch& batch, bool sync) override {
    last_batch_ = Writes(batch);
    ++writes_;
    RETURN_IF_ERROR(Refused(batch));
    return base_->Write(batch, sync);
  }
  // Non-OK: the batch fails with that status and changes nothing.
  absl::Status Refused(const WriteBatch& batch) {
    MutexLock lock(fail_mu_);
    return fail_commit_ ? fail_commit_(batch) : absl::OkStatus();
  }
  void SetFailCommit(std::function<absl::Status(const WriteBatch&)> fn) {
    MutexLock lock(fail_mu_);
    fail_commit_ = std::move(fn);
  }
  using KvStore::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                   size_t limit) override {
    ++scans_;
    return base_->Scan(begin, end, limit);
  }
  absl::Status Sync() override { return base_->Sync(); }
  uint64_t ApproximateSize() override { return base_->ApproximateSize(); }
  std::unique_ptr<KvTxn> Begin() override {
    if (!base_->shared()) return KvStore::Begin();  // commits come back through Write
    return std::make_unique<CountingTxn>(this, base_->Begin());
  }
  bool shared() const override { return base_->shared(); }
  std::string_view kind() const override { return base_->kind(); }

  std::atomic<size_t> last_batch_{0};
  std::atomic<size_t> writes_{0};
  std::atomic<size_t> scans_{0};

 private:
  KvStore* base_;
  Mutex fail_mu_;
  std::function<absl::Status(const WriteBatch&)> fail_commit_ ABSL_GUARDED_BY(fail_mu_);
};

inline absl::Status CountingTxn::Commit(const WriteBatch& batch, bool sync) {
  owner_->last_batch_ = CountingKvStore::Writes(batch);
  ++owner_->writes_;
  RETURN_IF_ERROR(owner_->Refused(batch));
  return base_->Commit(batch, sync);
}

inline FilerOptions TestOptions(Clock* clock) {
  FilerOptions o;
  o.background_loops = false;
  o.orphan_grace = std::chrono::milliseconds(0);
  o.session_timeout = std::chrono::milliseconds(10'000);
  o.lock_stripes = 64;
  o.clock = clock;
  return o;
}

// A FilerService on a fresh "memory", "rocksdb" or "shared" (memory, behaving like a store
// several filers share) store, with a fake cluster and clock.
class Harness {
 public:
  explicit Harness(std::string backend, std::function<void(FilerOptions&)> tweak = nullptr)
      : backend_(std::move(backend)) {
    opts_ = TestOptions(&clock);
    if (tweak) tweak(opts_);
    OpenStore();
    Boot();
  }
  ~Harness() {
    fs.reset();
    counting.reset();
    kv.reset();
  }

  // Stops the service and, for RocksDB, closes the store; then opens both again, as a filer
  // process restart does. Sessions (memory only) are lost.
  void Restart() {
    fs->Stop();
    fs.reset();
    counting.reset();
    if (backend_ == "rocksdb") {
      kv.reset();
      OpenStore();
    }
    Boot();
  }

  // Stops the service and closes the RocksDB store (its directory stays, for tools such as
  // fsck that open it themselves); Open() starts both again.
  void Close() {
    REQUIRE(backend_ == "rocksdb");
    fs->Stop();
    fs.reset();
    counting.reset();
    kv.reset();
  }
  void Open() {
    OpenStore();
    Boot();
  }
  const std::filesystem::path& dir() const { return dir_; }

  FilerOptions& options() { return opts_; }
  const std::string& backend() const { return backend_; }

  uint64_t Mkdir(uint64_t parent, const std::string& name, uint32_t mode = 0755) {
    CreateArgs a;
    a.parent = parent;
    a.name = name;
    a.mode = S_IFDIR | mode;
    auto r = fs->Create(a);
    REQUIRE(r.ok());
    return r->ino();
  }
  // With a session: the new file is open in it (as a mount's create leaves it).
  uint64_t Mkfile(uint64_t parent, const std::string& name, const std::string& session = "") {
    CreateArgs a;
    a.parent = parent;
    a.name = name;
    a.mode = S_IFREG | 0644;
    a.exclusive = true;
    a.session = session;
    a.open_handle = !session.empty();
    auto r = fs->Create(a);
    REQUIRE(r.ok());
    return r->ino();
  }
  std::vector<std::string> Names(uint64_t dir) {
    std::vector<std::string> out;
    REQUIRE(fs->ReadDir(dir, 0, 0, false, [&](DirEntry&& e) {
                out.push_back(e.name());
                return true;
              }).ok());
    return out;
  }
  std::vector<std::string> GcFids() {
    auto p = fs->gc().Pending(100000);
    REQUIRE(p.ok());
    std::vector<std::string> out;
    for (const auto& g : *p) out.push_back(g.fid);
    std::sort(out.begin(), out.end());
    return out;
  }
  void RequireConsistent() {
    auto r = CheckNamespace(*kv);
    REQUIRE(r.ok());
    INFO(r->Summary());
    REQUIRE(r->ok());
  }

  FakeClock clock;
  FakeCluster cluster;
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<CountingKvStore> counting;
  std::unique_ptr<FilerService> fs;

 private:
  void OpenStore() {
    if (backend_ == "rocksdb") {
      auto r = OpenRocksKvStore(dir_.string());
      REQUIRE(r.ok());
      kv = std::move(*r);
    } else {
      // "shared": a store as several filers see it (transactions validated, event ranges).
      kv = NewMemoryKvStore(backend_ == "shared");
    }
  }
  void Boot() {
    counting = std::make_unique<CountingKvStore>(kv.get());
    fs = std::make_unique<FilerService>(counting.get(), &cluster, opts_);
    auto s = fs->Start();
    INFO(s.ToString());
    REQUIRE(s.ok());
  }

  std::string backend_;
  FilerOptions opts_;
  kelp::testing::TempDir tmp_{"kelp-filer-test"};  // removed after the store is closed
  std::filesystem::path dir_{tmp_.path()};
};

// Directories a and b under the root cross: one thread moves b into a and back through x,
// another a into b and back through y, rounds times each, so half the moves would build a
// cycle if both checks passed at once. Returns how many moves succeeded.
inline int CrossingMoves(FilerService& x, FilerService& y, uint64_t a, uint64_t b, int rounds) {
  std::atomic<int> moved{0};
  std::thread t1([&] {
    for (int i = 0; i < rounds; ++i) {
      if (x.Rename(1, "b", a, "b", 0).ok()) ++moved;
      if (x.Rename(a, "b", 1, "b", 0).ok()) ++moved;
    }
  });
  std::thread t2([&] {
    for (int i = 0; i < rounds; ++i) {
      if (y.Rename(1, "a", b, "a", 0).ok()) ++moved;
      if (y.Rename(b, "a", 1, "a", 0).ok()) ++moved;
    }
  });
  t1.join();
  t2.join();
  return moved;
}

// The errno of a status or StatusOr.
// Every event the subscription has now, without waiting.
inline std::vector<Event> Drain(EventSubscription& sub) {
  std::vector<Event> out;
  for (;;) {
    auto batch = sub.Next(100, std::chrono::milliseconds(0));
    REQUIRE(batch.ok());
    if (batch->empty()) return out;
    for (auto& e : *batch) out.push_back(std::move(e));
  }
}

inline int Err(const absl::Status& s) { return ErrnoOf(s); }
template <typename T>
int Err(const absl::StatusOr<T>& s) {
  return ErrnoOf(s.status());
}

#define KELP_BACKENDS GENERATE(as<std::string>{}, "memory", "rocksdb", "shared")

}  // namespace kelp::filer::testing
