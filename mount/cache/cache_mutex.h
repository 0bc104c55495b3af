// A std::mutex with clang thread-safety annotations, so ABSL_GUARDED_BY in the cache is checked
// by -Wthread-safety. Not absl::Mutex: Debian's prebuilt abseil is not built for ThreadSanitizer,
// which then cannot see its synchronisation, while std::mutex goes through pthread, which TSan
// intercepts. Thread-safety: it is a mutex.
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace kelp::mount::cache {

class ABSL_LOCKABLE CacheMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE CacheMutexLock {
 public:
  explicit CacheMutexLock(CacheMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~CacheMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  CacheMutexLock(const CacheMutexLock&) = delete;
  CacheMutexLock& operator=(const CacheMutexLock&) = delete;

 private:
  CacheMutex* const mu_;
};

}  // namespace kelp::mount::cache
