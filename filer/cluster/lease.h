// The coordinator lease. Of the filers sharing one store, one at a time is the cluster's
// coordinator: it hears volume servers' heartbeats, places volumes, hands out file ids,
// collects garbage and does the store-wide chores; the others forward to it. The lease is one
// row (key Mcoordinator, docs/filer-keys.md) with the holder's name, addresses, an expiry and
// the cluster's capacity as the holder last saw it. The holder renews it in a transaction
// every third of the lease; another filer takes it over in a transaction once it expired.
// A filer that stops releases it, so another takes over within a check interval.
//
// The holder stops calling itself holder a quarter of the lease before the expiry it wrote,
// by its own monotonic clock, so while wall clocks agree within a quarter of the lease no two
// filers act as coordinator at once. If they briefly do anyway nothing breaks: needle keys
// and volume ids come from ranges taken in the store, deletes are idempotent.
//
// On a store only this process opens there is nobody to share with: this filer always holds
// the lease and nothing is written.
//
// Thread-safe. Start/Stop from the owner's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "filer/store/kv_store.h"
#include "shared/mutex.h"

namespace kelp::filer {

class CoordinatorLease {
 public:
  struct Holder {
    std::string id;
    std::string grpc_address;  // "host:port" of its gRPC services
    std::string http_address;  // "host:port" of its HTTP API
    int64_t expires_ms = 0;    // wall clock
    uint64_t epoch = 0;        // grows with every change of holder
    uint64_t total_bytes = 0;  // the cluster's capacity, as the holder saw it
    uint64_t free_bytes = 0;
  };
  struct Options {
    // This filer's name: unique among the filers of the store.
    std::string id;
    std::string grpc_address;
    std::string http_address;
    // How long a lease lasts without renewal; a dead holder is replaced after about this
    // long. Default: 6000 ms.
    std::chrono::milliseconds lease{6000};
    // The holder publishes the cluster's capacity (total, free bytes) with each renewal, so
    // the other filers can answer statfs. May be empty.
    std::function<std::pair<uint64_t, uint64_t>()> capacity;
    // Called from the lease's thread when this filer becomes (true) or stops being (false)
    // the coordinator. May be empty.
    std::function<void(bool)> on_change;
    // Time sources (tests); empty = the real clocks. In ms.
    std::function<int64_t()> wall_ms;
    std::function<int64_t()> mono_ms;
  };

  CoordinatorLease(KvStore* kv, Options options);
  ~CoordinatorLease();

  // Where this filer listens, when only known once its servers started (ports chosen by the
  // system). Call before Start.
  void SetAddresses(std::string grpc_address, std::string http_address);

  // Tries once at once, then keeps trying (or renewing) on a thread of its own.
  absl::Status Start();
  // Stops the thread and releases the lease if held.
  void Stop();
  // One attempt to take or renew the lease (the thread calls it; so can tests).
  absl::Status RunOnce();

  bool IsHolder() const;
  // The holder as last read (this filer, when it holds the lease); nullopt before any.
  std::optional<Holder> holder() const;

  // The lease as stored; nullopt when there is none.
  static absl::StatusOr<std::optional<Holder>> Read(KvReader& kv);
  // For offline tools (fsck, copy) on a store filers share: FailedPrecondition naming the
  // coordinator while a lease is live (a filer is running), OK otherwise.
  static absl::Status CheckNoFilerRunning(KvStore& kv);

 private:
  int64_t WallMs() const;
  int64_t MonoMs() const;
  absl::Status TryOnce();
  // Records a change of role; Notify() (called without mu_) tells on_change.
  void SetHolderLocked(bool holder) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify();
  void Loop();

  KvStore* const kv_;
  Options opts_;  // addresses set before Start, constant after
  mutable Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Holder> holder_ ABSL_GUARDED_BY(mu_);
  int64_t held_until_mono_ms_ ABSL_GUARDED_BY(mu_) = 0;  // 0 = not held
  bool was_holder_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> changes_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kelp::filer
