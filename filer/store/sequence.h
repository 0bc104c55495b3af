// A persistent counter handed out in ranges: the store records a high-water mark ahead of
// what has been handed out, so a restart continues above every number ever returned (reuse
// never happens) and most allocations touch no disk. One allocator hands out consecutive
// numbers, across its ranges too (the event log relies on it); gaps appear only at a restart
// and between filers. Ranges are taken in a
// transaction that reads the mark and raises it, so several filers sharing one store get
// disjoint ranges and never hand out the same number.
//
// Thread-safe. The mark is read and written (synced) under the allocator's own mutex about
// once per `step` numbers; that mutex is a leaf (lock_table.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"
#include "shared/mutex.h"

namespace kelp::filer {

class SequenceAllocator {
 public:
  // name: a keys::k*Seq name. step: how many numbers one range covers beyond what a call asks.
  SequenceAllocator(KvStore* kv, std::string_view name, uint64_t step);

  // Reads the mark; the first number handed out is at least max(mark, min_first).
  absl::Status Load(uint64_t min_first);
  // Reserves n consecutive numbers and returns the first.
  absl::StatusOr<uint64_t> Next(uint64_t n = 1);
  // Makes every later number greater than v (e.g. a volume server reported a needle key this
  // filer never handed out: another filer did, or the store was restored from an old copy).
  absl::Status RaiseAbove(uint64_t v);
  // The number the next call would return (if its range still holds it).
  uint64_t Peek() const;

 private:
  // Takes a fresh range of at least n numbers, none below `floor`, from the store.
  absl::Status TakeRangeLocked(uint64_t n, uint64_t floor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KvStore* const kv_;
  const std::string key_;
  const uint64_t step_;
  mutable Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t limit_ ABSL_GUARDED_BY(mu_) = 1;  // this allocator's range is [next_, limit_)
};

}  // namespace kelp::filer
