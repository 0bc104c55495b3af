// The metadata event log: every mutation writes its events (key family E, docs/filer-keys.md)
// in the same WriteBatch as the change itself, with sequences from this log. Subscribers read
// history from the store and then wait on a condition variable for live events.
//
// Sequences are reserved before a batch is written and completed after, whatever the
// outcome; published() is the highest seq such that every seq at or below it is completed,
// so a reader never skips an event that commits late. Seqs of failed writes and of restarts
// leave gaps, which readers step over.
//
// Thread-safe. mu_ is a leaf lock (filer/core/lock_table.h); it nests the sequence
// allocator's mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/core/clock.h"
#include "filer/core/options.h"
#include "filer/store/kv_store.h"
#include "filer/store/records.h"
#include "filer/store/sequence.h"
#include "proto/filer.pb.h"
#include "shared/mutex.h"

namespace kelp::filer {

// An event about rec (its attributes as they are now): kind, the entry parent/name it
// concerns ("" and 0 for attribute and data events). Seq and time are set when it is
// written (EventLog::Write).
Event MakeEvent(EventKind kind, const InodeRecord& rec, uint64_t parent, std::string_view name);

class EventLog {
 public:
  EventLog(KvStore* kv, Clock* clock, const FilerOptions& opts);

  absl::Status Load();

  // The one way events enter the log: writes batch b with events appended, each given the
  // next seq and, where it has none, the time now. The seqs are published once the write has
  // succeeded or failed. sync: a synced write (the WAL reaches the disk before it returns).
  absl::Status Write(WriteBatch& b, std::vector<Event>& events, bool sync = false);

  uint64_t published() const;
  // Seqs below the floor were trimmed.
  uint64_t floor() const;

  // Blocks until published() > after, the deadline, or Stop(). True if published() > after.
  bool WaitBeyond(uint64_t after, std::chrono::steady_clock::time_point deadline);

  // Drops events beyond the retention bounds (options), one bounded step per call.
  absl::Status Trim();

  // Wakes every waiter; WaitBeyond returns at once from now on.
  void Stop();
  bool stopped() const;

 private:
  // Reserves n consecutive seqs and returns the first. Each reserved seq must be passed to
  // Complete() once its batch was written or failed.
  absl::StatusOr<uint64_t> Reserve(size_t n);
  void Complete(uint64_t first, size_t n);

  KvStore* const kv_;
  Clock* const clock_;
  const FilerOptions opts_;
  SequenceAllocator seq_;
  // Lock order: trim_mu_, then mu_; mu_ is a leaf (seq_'s mutex is never taken under it).
  mutable Mutex mu_;
  CondVar cv_;
  uint64_t published_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> done_ ABSL_GUARDED_BY(mu_);  // completed seqs above published_
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  Mutex trim_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Trim at a time
};

// One subscriber's cursor over the log. Not thread-safe: one thread reads it.
class EventSubscription {
 public:
  // filter: which events this subscriber wants (nullptr = all). reset_first: the first
  // Next() answers EVENT_RESET (the subscriber asked for history that is gone).
  EventSubscription(EventLog* log, KvStore* kv, Clock* clock, uint64_t cursor, bool reset_first,
                    std::function<bool(const Event&)> filter);

  // Up to max events at or after the cursor, in seq order; waits up to `wait` when there are
  // none (then answers an empty vector). If the subscriber fell behind retention, answers a
  // single EVENT_RESET (seq = the last seq it will never see) and continues after it.
  // UNAVAILABLE once the filer stops.
  absl::StatusOr<std::vector<Event>> Next(size_t max, std::chrono::milliseconds wait);

  // The next seq this subscription will read.
  uint64_t cursor() const { return cursor_; }

 private:
  Event Reset();

  EventLog* const log_;
  KvStore* const kv_;
  Clock* const clock_;
  uint64_t cursor_;
  bool reset_pending_;
  std::function<bool(const Event&)> filter_;
};

}  // namespace kelp::filer
