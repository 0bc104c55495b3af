#include "mount/core/write_budget.h"

#include <algorithm>
#include <chrono>

namespace kelp::mount {

void WriteBudget::Acquire(uint64_t n) {
  n = std::min(n, capacity_);
  MutexLock lock(mu_);
  if (used_ + n <= capacity_) {
    // Half full: uploads start now, so that writers seldom find the budget full and wait.
    bool half = used_ < capacity_ / 2 && used_ + n >= capacity_ / 2;
    used_ += n;
    if (half && on_pressure_) {
      lock.Unlock();
      on_pressure_();
    }
    return;
  }
  ++waits_;
  while (used_ + n > capacity_) {
    if (on_pressure_) {
      lock.Unlock();
      on_pressure_();
      lock.Lock();
      if (used_ + n <= capacity_) break;
    }
    // Wake up now and then to push again: an upload may have finished for a file that gets
    // dirty again before we run.
    freed_.WaitFor(lock, std::chrono::milliseconds(100));
  }
  used_ += n;
}

bool WriteBudget::TryAcquire(uint64_t n) {
  n = std::min(n, capacity_);
  MutexLock lock(mu_);
  if (used_ + n > capacity_) return false;
  used_ += n;
  return true;
}

void WriteBudget::Release(uint64_t n) {
  {
    MutexLock lock(mu_);
    n = std::min(n, used_);
    used_ -= n;
  }
  freed_.NotifyAll();
}

uint64_t WriteBudget::used() const {
  MutexLock lock(mu_);
  return used_;
}

uint64_t WriteBudget::waits() const {
  MutexLock lock(mu_);
  return waits_;
}

}  // namespace kelp::mount
