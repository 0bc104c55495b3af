// WriteBudget: the bound on dirty data held in memory (-writeBufferSizeMB). A writer
// acquires room before it copies data in and the room is released when the data has been
// uploaded (or dropped). The pressure callback (run outside the lock) starts uploads: when an
// Acquire takes the budget past half full, and when a writer has to wait (once per wait; the
// writer then sleeps until room frees).
//
// Thread-safety: every method may be called from any thread. Never call Acquire while
// holding a lock that the uploads releasing room need.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp::mount {

class WriteBudget {
 public:
  explicit WriteBudget(uint64_t capacity) : capacity_(capacity) {}

  // Runs when the budget passes half full and when a writer has to wait. Set once, before any
  // Acquire.
  void SetPressureCallback(std::function<void()> fn) { on_pressure_ = std::move(fn); }

  // Blocks until n bytes fit. A request larger than the whole capacity waits for an empty
  // budget and then takes it all, so it cannot wait forever.
  void Acquire(uint64_t n);
  bool TryAcquire(uint64_t n);
  void Release(uint64_t n);

  uint64_t used() const;
  uint64_t capacity() const { return capacity_; }
  uint64_t waits() const;  // how many Acquire calls had to wait (for tests and metrics)

 private:
  const uint64_t capacity_;
  std::function<void()> on_pressure_;
  mutable Mutex mu_;  // a leaf (taken under FileData::mu_); on_pressure_ runs without it
  CondVar freed_;
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kelp::mount
