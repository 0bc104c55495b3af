// The metadata event log: every mutation writes its events (key family E, docs/filer-keys.md)
// in the same WriteBatch as the change itself, with sequences from this log. Subscribers read
// history from the store and then wait on a condition variable for newer events.
//
// Sequences are reserved before a batch is written and completed after, whatever the
// outcome; published() is the highest seq such that no event at or below it can still
// appear, so a reader never skips an event that commits late. Seqs of failed writes and of
// restarts leave gaps, which readers step over.
//
// On a store several filers share (KvStore::shared()), seqs come in short-lived ranges that
// every filer can see (key family R): a range is opened in a transaction that raises the
// event high-water mark, used for at most options.event_range_life, and deleted once every
// seq handed out of it completed. A seq is published when no open range (this filer's or
// another's, as of the latest snapshot Poll() read) could still produce one below it. A
// mutation's batch Requires its range's key, so a range that was revoked (its owner's lease
// ran out: a filer that died mid-write) can never gain an event after readers passed it.
// Each filer tails the log in the store, so its subscribers see every filer's mutations.
// docs/filer-stores.md has the argument in full.
//
// Thread-safe. open_mu_ (opening a range) is taken before mu_; mu_ is a leaf lock
// (filer/core/lock_table.h) and nests the sequence allocator's mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
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
  ~EventLog();

  absl::Status Load();
  // Shared stores with background loops: starts the thread that calls Poll() every
  // options.event_poll_interval.
  void Start();

  // Shared stores: call before a transaction takes its first snapshot. Makes sure the range
  // its events will come from is open already, so the transaction sees that range's key (a
  // range opened later is invisible to it, and its Require would fail).
  absl::Status Prepare();
  // The one way events enter the log: writes batch b with events appended, each given the
  // next seq, the caller's client id as its origin (rpc::CallerId(), shared/rpc/caller.h)
  // and, where it has none, the time now. The seqs are published once the write has
  // succeeded or failed. sync: a synced write (the WAL reaches the disk before it returns).
  // txn: the operation's transaction, which commits the batch (shared stores need one: the
  // batch Requires the key of the range its seqs came from); null writes it with kv->Write.
  // A range revoked meanwhile answers a conflict (IsConflict): the operation runs again.
  absl::Status Write(WriteBatch& b, std::vector<Event>& events, bool sync = false, KvTxn* txn = nullptr);

  uint64_t published() const;
  // Seqs below the floor were trimmed.
  uint64_t floor() const;

  // Blocks until published() > after, the deadline, or Stop(). True if published() > after.
  // With skip_origin (registered by AddSkipper): until an event of another origin may have
  // been published past after (Visible().second > after); the events of skip_origin alone
  // do not wake it.
  bool WaitBeyond(uint64_t after, std::chrono::steady_clock::time_point deadline,
                  uint64_t skip_origin = 0);
  // Subscribers that leave out one origin's events register it while they read, so that the
  // log tracks where the others' events are.
  void AddSkipper(uint64_t origin);
  void RemoveSkipper(uint64_t origin);
  // published(), and the highest published seq at or below which an event of an origin other
  // than skip_origin may be (every seq above it and up to published() holds events of
  // skip_origin or none). Without skip_origin (0), or one not registered: published() twice.
  // Only this filer's own writes have a known origin: seqs published by other filers of a
  // shared store count as other origins'.
  std::pair<uint64_t, uint64_t> Visible(uint64_t skip_origin) const;
  // Threads blocked in WaitBeyond now (subscribers waiting for an event). For tests that
  // must know a subscriber is waiting before they act.
  int waiters() const;

  // Drops events beyond the retention bounds (options), one bounded step per call.
  absl::Status Trim();

  // Shared stores: retires this filer's ranges that are old and done, reads which ranges
  // other filers hold open (and the trim floor), revokes ranges whose lease ran out, and
  // publishes what became final. No-op otherwise.
  absl::Status Poll();

  // Wakes every waiter; WaitBeyond returns at once from now on. Joins the poll thread.
  void Stop();
  bool stopped() const;

 private:
  struct Reservation {
    uint64_t first = 0;
    // Shared stores: the key of the range the seqs came from; the mutation's batch must
    // Require it. Empty otherwise.
    std::string guard;
  };
  // Reserves n consecutive seqs. Each reserved seq must be passed to Complete() once its
  // batch was written or failed.
  absl::StatusOr<Reservation> Reserve(size_t n);
  // origin: of the events written at those seqs.
  void Complete(uint64_t first, size_t n, uint64_t origin);
  // published_ moved up to seq; origin: of every seq it passed (0 = unknown or mixed).
  void PublishedLocked(uint64_t seq, uint64_t origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A write failed because its range (guard) is gone: hand out no more from it.
  void Revoked(std::string_view guard);

  struct Range {
    uint64_t first = 0, limit = 0, next = 0;
    int64_t opened_mono_ns = 0;
    std::set<uint64_t> inflight;  // handed out, not completed
    bool retired = false;         // hands out nothing more
    bool closing = false;         // its key is being deleted
  };
  struct Snapshot {
    uint64_t q = 1;  // the event high-water mark
    std::map<uint64_t, std::pair<uint64_t, int64_t>> ranges;  // first -> (limit, expires_ms)
    uint64_t floor = 1;
  };

  bool shared() const { return kv_->shared(); }
  absl::StatusOr<Reservation> ReserveShared(size_t n);
  // The active range is usable and younger than renew_ns.
  bool ActiveFreshLocked(int64_t renew_ns) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands n seqs out of the active range if it can.
  bool TakeLocked(size_t n, Reservation* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opening a range is a transaction and must not hold mu_.
  absl::Status OpenRange(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(open_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Snapshot> ReadSnapshot(KvReader& r);
  // Adopts a snapshot's view of other filers' ranges if it is not older than the one held.
  void ApplySnapshotLocked(const Snapshot& s, uint64_t q_after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes a range's key in a transaction that also reads the whole range of events, so a
  // write still in flight with that range either committed before (and is visible) or fails.
  absl::Status CloseRangeInStore(uint64_t first, uint64_t limit, bool must_exist);
  void RecomputeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PollLoop();

  KvStore* const kv_;
  Clock* const clock_;
  const FilerOptions opts_;
  SequenceAllocator seq_;  // stores only this process opens
  std::string owner_;      // this filer's name on its ranges
  // Lock order: trim_mu_, then open_mu_, then mu_, then seq_'s mutex (a leaf).
  Mutex open_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one range opening at a time
  mutable Mutex mu_;
  CondVar cv_;
  uint64_t published_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, uint64_t> done_
      ABSL_GUARDED_BY(mu_);  // completed seqs above published_ -> origin
  struct Skipper {
    int refs = 0;
    uint64_t foreign = 0;                                       // Visible().second
    std::unique_ptr<CondVar> cv = std::make_unique<CondVar>();  // its waiters
  };
  std::map<uint64_t, Skipper> skippers_ ABSL_GUARDED_BY(mu_);  // by origin
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  // Shared stores.
  std::map<uint64_t, Range> own_ ABSL_GUARDED_BY(mu_);  // by first
  uint64_t active_ ABSL_GUARDED_BY(mu_) = 0;            // first of the range handing out; 0 = none
  uint64_t known_q_ ABSL_GUARDED_BY(mu_) = 1;           // high-water mark of the latest snapshot
  std::set<uint64_t> remote_ ABSL_GUARDED_BY(mu_);      // other filers' open ranges (firsts)
  std::thread poller_;
  Mutex trim_mu_ ABSL_ACQUIRED_BEFORE(open_mu_, mu_);  // one Trim at a time
};

// One subscriber's cursor over the log. Not thread-safe: one thread reads it.
class EventSubscription {
 public:
  // filter: which events this subscriber wants (nullptr = all). reset_first: the first
  // Next() answers EVENT_RESET (the subscriber asked for history that is gone). skip_origin:
  // leave out the events of that origin (Event.origin; 0 = none); without a filter, without
  // reading them from the store where the log knows that a stretch holds nothing else
  // (EventLog::Visible), and without waking for them.
  EventSubscription(EventLog* log, KvStore* kv, Clock* clock, uint64_t cursor, bool reset_first,
                    std::function<bool(const Event&)> filter, uint64_t skip_origin = 0);
  ~EventSubscription();
  EventSubscription(const EventSubscription&) = delete;
  EventSubscription& operator=(const EventSubscription&) = delete;

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
  const uint64_t skip_origin_;
};

}  // namespace kelp::filer
