// Chunk garbage collection. Mutations that drop the last reference to a blob append it to
// the durable GC queue (key family G, ordered by due time) in their own WriteBatch
// (Enqueue); this worker deletes due blobs from the volume servers in batches through
// ClusterApi::DeleteBlobs and re-queues failures with exponential backoff. A restart loses
// nothing: the queue is in the store, and an entry leaves it only in the batch that follows
// a successful delete.
//
// A blob belongs to one inode: the filer only queues a fid when no chunk record of that
// inode references it any more (docs/filer-keys.md, "Blob ownership").
//
// Thread-safe. Start/Stop from the owner's thread; Enqueue/Wake/RunOnce from any thread.
// run_mu_ serialises delete rounds and is held across the DeleteBlobs RPC; it is never held
// together with any other filer lock.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/cluster/cluster_api.h"
#include "filer/core/clock.h"
#include "filer/core/options.h"
#include "filer/store/sequence.h"
#include "filer/store/kv_store.h"
#include "filer/store/records.h"
#include "shared/mutex.h"

namespace kelp::filer {

class GcWorker {
 public:
  GcWorker(KvStore* kv, ClusterApi* cluster, Clock* clock, const FilerOptions& opts);
  ~GcWorker();
  GcWorker(const GcWorker&) = delete;
  GcWorker& operator=(const GcWorker&) = delete;

  // Loads the GC sequence and counts the queue (one scan).
  absl::Status Load();
  // Starts the loop; a queue left by the last run is worked on at once.
  void Start();
  void Stop();

  // Adds queue entries for fids (due now) to batch. Once the batch is written, call
  // Queued(fids.size()) and Wake().
  absl::Status Enqueue(WriteBatch* batch, const std::vector<std::string>& fids, uint64_t ino);
  void Queued(size_t n) { pending_ += static_cast<int64_t>(n); }
  void Wake();

  // One round: deletes up to options.gc_batch due blobs. Returns how many were deleted.
  absl::StatusOr<size_t> RunOnce();

  // Entries in the queue, due or not, in key order (at most max). For tests and fsck.
  absl::StatusOr<std::vector<GcValue>> Pending(size_t max) const;

  // Entries in the queue (due or not): counted at Load, kept up to date since.
  uint64_t pending() const { return static_cast<uint64_t>(std::max<int64_t>(pending_.load(), 0)); }
  uint64_t deleted_total() const { return deleted_total_.load(); }
  uint64_t failed_total() const { return failed_total_.load(); }

 private:
  void Loop();
  int64_t BackoffMs(uint64_t attempts) const;

  KvStore* const kv_;
  ClusterApi* const cluster_;
  Clock* const clock_;
  const FilerOptions opts_;
  SequenceAllocator seq_;
  // One RunOnce at a time. It guards no field, and is held across RunOnce's store reads and
  // volume deletes (that is its purpose); seq_'s mutex may be taken under it, mu_ never is.
  Mutex run_mu_;

  // A leaf: guards the loop's wake-up state only.
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;

  std::atomic<uint64_t> deleted_total_{0};
  std::atomic<uint64_t> failed_total_{0};
  std::atomic<int64_t> pending_{0};
};

}  // namespace kelp::filer
