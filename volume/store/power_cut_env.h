// An Env whose files behave, across a kill -9 of the process, the way real files behave across
// a power cut: a write reaches the file on disk only when DataSync() covers it. Until then it
// sits in this process's memory (an overlay of byte ranges per file, which ReadAt and Size
// see), so a process killed with kill -9 loses exactly the writes no fdatasync covered, and a
// restart finds the file as of its last DataSync(). Behind `kelp volume -testing.powerCut`
// (and `kelp server`), for the power-cut crash test (tests/mount/power_cut_test.sh); never
// for real data: nothing unsynced survives even a clean stop.
//
// The model is the pessimistic end of what a power cut may do: no unsynced byte survives.
// Creating, renaming and removing files act on the disk at once (the store syncs its
// directory after those). Memory grows with the bytes written and not yet synced.
//
// Threads: thread-safe. Every open File of one path shares one overlay; Rename and Remove
// move or drop it with the path.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"
#include "volume/store/env.h"

namespace kelp::volume {

class PowerCutEnv : public Env {
 public:
  explicit PowerCutEnv(Env* base = Env::Default()) : base_(base) {}

  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) override;
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Remove(const std::string& path) override;
  absl::Status CreateDir(const std::string& dir) override { return base_->CreateDir(dir); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return base_->ListDir(dir);
  }
  absl::Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  absl::StatusOr<DiskUsage> GetDiskUsage(const std::string& dir) override {
    return base_->GetDiskUsage(dir);
  }

  // Bytes written and not yet synced, over every file (overlapping rewrites counted once).
  uint64_t unsynced_bytes();

 private:
  class State;
  class PowerCutFile;

  Env* const base_;
  Mutex mu_;  // taken before any State's own lock
  std::map<std::string, std::shared_ptr<State>> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::volume
