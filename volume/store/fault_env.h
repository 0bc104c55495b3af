// An Env for tests: passes everything through to a base Env (normally Env::Default() on a
// temporary directory) and can fail writes the way a full disk does, cut writes short, count
// or intercept fdatasync calls, and hold a drop-behind wait. In the spirit of rocksdb's
// FaultInjectionTestFS.
//
// Threads: all methods are thread-safe; hooks run on the thread doing the I/O.
#pragma once

#include <atomic>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"
#include "volume/store/env.h"

namespace kelp::volume {

class FaultEnv : public EnvWrapper {
 public:
  explicit FaultEnv(Env* base = Env::Default()) : EnvWrapper(base) {}

  // Writes may add at most `bytes` more bytes across all files; the write that crosses the
  // budget is cut short (a short write) and later ones fail with ENOSPC. -1 = unlimited.
  void SetWriteBudget(int64_t bytes) {
    MutexLock lock(mu_);
    budget_ = bytes;
  }
  // Every write returns at most this many bytes (0 = no limit): exercises short-write loops.
  void SetMaxWriteChunk(size_t bytes) { max_chunk_.store(bytes); }
  // Called before every DataSync; may block (to force an interleaving) or return an error.
  void SetSyncHook(std::function<absl::Status()> hook) {
    MutexLock lock(mu_);
    sync_hook_ = std::move(hook);
  }

  // Called before every DropCached (the wait for a written range, then its pages dropped);
  // may block, to hold an appender in it.
  void SetDropHook(std::function<void()> hook) {
    MutexLock lock(mu_);
    drop_hook_ = std::move(hook);
  }

  int data_syncs() const { return data_syncs_.load(); }
  int64_t bytes_written() const { return bytes_written_.load(); }

  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) override;

 private:
  friend class FaultFile;
  // How many of n bytes a write may write now; 0 with *enospc set means fail.
  size_t Admit(size_t n, bool* enospc);
  absl::Status BeforeSync();
  void BeforeDrop();

  Mutex mu_;
  int64_t budget_ ABSL_GUARDED_BY(mu_) = -1;
  std::function<absl::Status()> sync_hook_ ABSL_GUARDED_BY(mu_);
  std::function<void()> drop_hook_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> max_chunk_{0};
  std::atomic<int> data_syncs_{0};
  std::atomic<int64_t> bytes_written_{0};
};

}  // namespace kelp::volume
