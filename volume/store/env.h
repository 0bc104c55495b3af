// The narrow file-system interface the volume store does all its I/O through, so tests can
// inject faults (ENOSPC, short writes) and count fdatasyncs (see fault_env.h). Modelled on
// leveldb's Env.
//
// Threads: Env and File implementations are thread-safe. A File may be read (ReadAt) from
// many threads at once and while another thread writes it; the store serialises writers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp::volume {

class File {
 public:
  virtual ~File() = default;
  // Reads up to n bytes at offset into buf. Returns fewer than n only at the end of the file.
  virtual absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* buf) const = 0;
  // Writes data at offset. May write fewer bytes than asked (a short write), which the caller
  // treats as its own problem; an error means nothing more could be written.
  virtual absl::StatusOr<size_t> WriteAt(uint64_t offset, std::string_view data) = 0;
  virtual absl::Status Truncate(uint64_t size) = 0;
  virtual absl::Status DataSync() = 0;  // fdatasync
  virtual absl::StatusOr<uint64_t> Size() const = 0;

  // Page-cache hints for a file written as a stream (Volume's drop-behind). They change no
  // content and promise no durability. StartWriteback starts writing [offset, offset + len)
  // to the device without waiting. DropCached waits until that range is written and drops it
  // from the page cache, so that the next writes reuse those pages instead of fresh ones (on
  // a VM a fresh page can cost more than the copy into it). A write error they meet is
  // returned by the next DataSync (the kernel reports it only once). Default: nothing.
  virtual void StartWriteback(uint64_t /*offset*/, uint64_t /*len*/) {}
  virtual void DropCached(uint64_t /*offset*/, uint64_t /*len*/) {}
};

struct DiskUsage {
  uint64_t total = 0;  // bytes
  uint64_t free = 0;   // bytes available to this process
};

class Env {
 public:
  virtual ~Env() = default;
  // Opens path for reading and writing; creates it if create is true and it is missing.
  virtual absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) = 0;
  virtual bool Exists(const std::string& path) = 0;
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  virtual absl::Status Remove(const std::string& path) = 0;    // OK if already absent
  virtual absl::Status CreateDir(const std::string& dir) = 0;  // with parents; OK if present
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  virtual absl::StatusOr<DiskUsage> GetDiskUsage(const std::string& dir) = 0;
  // Whether a path names a file that another process on this machine can open and read as it
  // is (the real file system: true); a volume on such files lets a local client read needles
  // straight from its .dat (docs/volume-http.md, "Local reads"). The test Envs say false:
  // what they change would not reach a reader of the file itself.
  virtual bool real_files() const { return false; }

  // The real file system (pread/pwrite/fdatasync). Never destroyed.
  static Env* Default();
};

// Passes every call to a base Env: the test Envs (fault_env.h, power_cut_env.h) override
// only what they change. Not owning; base must outlive it.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* base) : base_(base) {}
  absl::StatusOr<std::shared_ptr<File>> Open(const std::string& path, bool create) override {
    return base_->Open(path, create);
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  absl::Status Remove(const std::string& path) override { return base_->Remove(path); }
  absl::Status CreateDir(const std::string& dir) override { return base_->CreateDir(dir); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return base_->ListDir(dir);
  }
  absl::Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  absl::StatusOr<DiskUsage> GetDiskUsage(const std::string& dir) override {
    return base_->GetDiskUsage(dir);
  }

 protected:
  Env* const base_;
};

// Writes all of data at offset, looping over short writes. On failure some prefix may have
// been written; the caller truncates it away.
absl::Status WriteFully(File& file, uint64_t offset, std::string_view data);
// Reads exactly n bytes or fails (DataLoss at end of file).
absl::Status ReadFully(const File& file, uint64_t offset, size_t n, char* buf);

}  // namespace kelp::volume
