// Bounds the memory held by upload bodies being received at once (each is buffered whole
// before its needle is written): an upload waits for room, and gives up with 503 after a
// while, rather than let many large uploads exhaust memory.
//
// Threads: thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp::volume {

class UploadBudget {
 public:
  explicit UploadBudget(uint64_t capacity_bytes)
      : capacity_(std::max<uint64_t>(capacity_bytes, 1)) {}

  // Takes n bytes (at most the whole capacity, so any single upload can proceed alone).
  // Returns the amount taken (pass it to Release), or 0 if there was no room within wait.
  uint64_t Acquire(uint64_t n, std::chrono::milliseconds wait) {
    n = std::clamp<uint64_t>(n, 1, capacity_);
    auto deadline = std::chrono::steady_clock::now() + wait;
    MutexLock l(mu_);
    ++waiters_;  // seen by others only while this thread is parked in WaitUntil
    while (used_ + n > capacity_) {
      if (!cv_.WaitUntil(l, deadline)) break;
    }
    --waiters_;
    if (used_ + n > capacity_) return 0;
    used_ += n;
    return n;
  }
  void Release(uint64_t n) {
    {
      MutexLock l(mu_);
      used_ -= n;
    }
    cv_.NotifyAll();
  }
  // Uploads waiting for room now.
  int waiters() const {
    MutexLock l(mu_);
    return waiters_;
  }

 private:
  const uint64_t capacity_;
  mutable Mutex mu_;
  CondVar cv_;
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kelp::volume
