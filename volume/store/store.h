// The volumes of one volume server, all in one directory. Loads what it finds at start-up,
// creates and deletes volumes on order of the coordinator, and hands out shared references
// to them (a volume being deleted stays usable by whoever still holds it).
//
// Threads: thread-safe. Get() is on every request's path and takes a reader lock only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "shared/mutex.h"
#include "volume/store/env.h"
#include "volume/store/volume.h"

namespace kelp::volume {

class Store {
 public:
  struct Options {
    std::string dir;                              // holds every <base>.dat/.idx
    uint32_t max_volumes = 8;                     // Allocate refuses beyond this many volumes
    uint64_t volume_size_limit = 30000ull << 20;  // bytes; a volume at or over it is read-only
    Env* env = nullptr;                           // nullptr = Env::Default()
  };

  explicit Store(Options options);

  // Opens every volume in dir (creating dir if needed). A volume that fails to open is
  // logged and skipped, not fatal: the others still serve.
  absl::Status Load();

  // Creates a volume. Idempotent for a volume that exists with the same collection.
  absl::StatusOr<std::shared_ptr<Volume>> Allocate(uint32_t id, const std::string& collection,
                                                   const std::string& replication);
  std::shared_ptr<Volume> Get(uint32_t id) const;  // nullptr if absent
  absl::Status Delete(uint32_t id);
  std::vector<std::shared_ptr<Volume>> List() const;  // ordered by id

  // The limit from the coordinator; the effective limit is the lower of it and the one in Options.
  void SetVolumeSizeLimit(uint64_t bytes);
  uint64_t volume_size_limit() const;
  uint32_t max_volumes() const { return opts_.max_volumes; }
  const std::string& dir() const { return opts_.dir; }
  absl::StatusOr<DiskUsage> GetDiskUsage() const { return env_->GetDiskUsage(opts_.dir); }

 private:
  const Options opts_;
  Env* const env_;
  // Taken by every request to find its volume; a leaf: no Volume lock is taken under it
  // (SetVolumeSizeLimit only stores each volume's atomic limit).
  mutable SharedMutex mu_;
  absl::flat_hash_map<uint32_t, std::shared_ptr<Volume>> volumes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> creating_ ABSL_GUARDED_BY(mu_);  // allocations under way
  uint64_t size_limit_ ABSL_GUARDED_BY(mu_);
};

// Splits "<collection>_<id>" or "<id>" (a file name without extension). False if it is neither.
bool ParseVolumeFileBase(std::string_view base, std::string* collection, uint32_t* id);

}  // namespace kelp::volume
