// The locks of Kelp: std::mutex and std::shared_mutex, annotated so clang's lock analysis
// (-Wthread-safety; scripts/thread_safety.sh, CONTRIBUTING.md) can check every
// ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED. libstdc++'s own types carry no
// annotations, so a field guarded by a std::mutex is not checked at all: use these.
//
//   Mutex mu_;                      // lock order: where it is declared (STYLE.md)
//   int n_ ABSL_GUARDED_BY(mu_);
//   { MutexLock lock(mu_); ++n_; }
//   while (!ready_) cv_.Wait(lock);           // CondVar: the predicate is the caller's loop,
//   if (!cv_.WaitFor(lock, 5s)) ...           // where the analysis sees the lock held
//
// At run time they are the standard types (no extra state but a MutexLock's flag; Mutex::lock
// tries a little before it blocks), so ThreadSanitizer sees them as it sees std::mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "shared/blocking.h"

namespace kelp {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Tries a little before it sleeps (glibc's adaptive mutex, on a std::mutex): a holder on
  // the other CPU lets go within a few microseconds, while sleeping on the lock costs a futex
  // wait here and a futex wake in the holder's unlock, each a system call.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    for (int i = 0; i < kSpins; ++i) {
      if (mu_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    }
    mu_.lock();
  }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it, where it cannot see so itself (a callback that
  // is documented to run under the lock). No run-time check.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  static constexpr int kSpins = 100;  // glibc's default for its adaptive mutexes
  std::mutex mu_;
};

// Holds mu for its scope; Unlock()/Lock() release and retake it inside the scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    held_ = true;
  }

 private:
  friend class CondVar;
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable for a MutexLock'd Mutex. No predicate overloads: the caller loops,
// so the guarded fields it tests are read where the analysis sees the lock held. A wait tells
// a thread's lender first (shared/blocking.h).
class CondVar {
 public:
  // Releases the lock while waiting; may wake spuriously.
  void Wait(MutexLock& lock) {
    AboutToBlock();
    std::unique_lock<std::mutex> l(lock.mu_.mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // False when the deadline passed (the lock is held again either way).
  template <class Clock, class Duration>
  bool WaitUntil(MutexLock& lock, std::chrono::time_point<Clock, Duration> deadline) {
    AboutToBlock();
    std::unique_lock<std::mutex> l(lock.mu_.mu_, std::adopt_lock);
    bool woken = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  template <class Rep, class Period>
  bool WaitFor(MutexLock& lock, std::chrono::duration<Rep, Period> d) {
    return WaitUntil(lock, std::chrono::steady_clock::now() + d);
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// Many readers or one writer.
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_.lock_shared();
  }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace kelp
