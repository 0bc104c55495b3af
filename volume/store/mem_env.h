// An Env that keeps every file in memory (leveldb's helpers/memenv in spirit): for fuzzing
// the volume loader (.dat/.idx recovery) without touching a disk, and for tests that want a
// volume with no directory. Disk usage is reported as 1 GiB total, all of it free.
//
// Threads: thread-safe; a File may be read and written from several threads at once.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"
#include "volume/store/env.h"

namespace kelp::volume {

class MemEnv : public Env {
 public:
  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) override;
  bool Exists(const std::string& path) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Remove(const std::string& path) override;
  absl::Status CreateDir(const std::string& dir) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override;
  absl::Status SyncDir(const std::string& dir) override { return absl::OkStatus(); }
  absl::StatusOr<DiskUsage> GetDiskUsage(const std::string& dir) override {
    return DiskUsage{1ull << 30, 1ull << 30};
  }

  // Replaces the content of path (creating it).
  void WriteFile(const std::string& path, std::string content);

 private:
  class MemFile;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<MemFile>> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::volume
