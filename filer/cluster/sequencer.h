// Persisted, never-reused counters for the cluster: needle keys and volume ids. Keys are
// handed out from a range reserved durably in the KvStore (one synced write per
// `reserve_step` keys), so a restart skips the rest of the range instead of reusing it.
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

class Sequencer {
 public:
  // key: where the reservation lives in kv (see docs/filer-keys.md). reserve_step: how many
  // values one durable write reserves.
  Sequencer(KvStore* kv, std::string key, uint64_t reserve_step);

  // Loads the reservation; the first value handed out afterwards is above anything a
  // previous run could have handed out.
  absl::Status Load();
  // Reserves count consecutive values; returns the first.
  absl::StatusOr<uint64_t> Next(uint64_t count);
  // Makes sure every later value is > v (e.g. a volume reported a key the store never saw).
  absl::Status RaiseAbove(uint64_t v);
  uint64_t peek() const;

 private:
  absl::Status ReserveLocked(uint64_t until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KvStore* const kv_;
  const std::string key_;
  const uint64_t step_;
  mutable std::mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t reserved_until_ ABSL_GUARDED_BY(mu_) = 1;  // values < this are reserved
};

}  // namespace kelp::filer
