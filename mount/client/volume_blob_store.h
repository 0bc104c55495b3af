// VolumeBlobStore: BlobStore over the volume servers' HTTP data plane (PUT /<fid>, ranged
// GET /<fid>). Fids come from the filer's Assign in batches (siblings key+1.. of one
// assignment), volume locations from LookupVolume, cached and looked up again when every
// cached replica failed. A failed upload is retried on a freshly assigned fid (another volume,
// maybe another server) before it is reported.
//
// Thread-safety: every method may be called from any thread concurrently. mu_ guards the fid
// pool and the location cache and is never held across an RPC or HTTP request.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "mount/client/blob_store.h"
#include "filer/client/filer_client.h"
#include "shared/file_id.h"
#include "shared/http/http_client.h"
#include "shared/metrics.h"

namespace kelp::mount {

class VolumeBlobStore : public BlobStore {
 public:
  struct Options {
    std::string replication;  // "" = the filer's default
    std::string collection;
    // Fids asked for per Assign. Default: 16.
    uint32_t assign_batch = 16;
    // How long a looked-up volume location is trusted, in seconds. Default: 600.
    int location_ttl_s = 600;
    // Attempts of one upload (each on a fresh fid after the first failure). Default: 3.
    int put_attempts = 3;
  };
  // meta and http are not owned and must outlive this.
  VolumeBlobStore(filer::FilerClient* meta, http::HttpClient* http, Options options);

  absl::StatusOr<std::string> Put(std::string_view data, bool fsync) override;
  absl::Status Get(std::string_view fid, uint64_t offset, size_t len, char* dst) override;
  // POST /sync?volumes=... to one holder of each volume (it syncs the other replicas); a
  // volume whose request failed is retried on its other holders, with fresh locations.
  absl::Status SyncVolumes(const std::vector<uint32_t>& volume_ids) override;

 private:
  struct Assigned {
    FileId fid;
    std::vector<std::string> urls;
  };
  struct Locations {
    std::vector<std::string> urls;
    std::chrono::steady_clock::time_point fetched;
  };
  absl::StatusOr<Assigned> NextFid();
  void DropPool();
  absl::StatusOr<std::vector<std::string>> LocationsOf(uint32_t volume_id, bool refresh);
  absl::Status SyncOn(const std::string& url, const std::vector<uint32_t>& volume_ids);
  absl::Status GetFrom(const std::string& url, std::string_view fid, uint64_t offset, size_t len, char* dst);

  filer::FilerClient* const meta_;
  http::HttpClient* const http_;
  const Options opts_;
  Counter* put_bytes_;
  Counter* get_bytes_;
  Counter* put_errors_;
  Counter* get_errors_;
  Counter* syncs_;

  std::mutex mu_;
  // The current assignment: fids base.key + next .. base.key + count - 1 are unused.
  FileId pool_base_ ABSL_GUARDED_BY(mu_);
  uint32_t pool_next_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t pool_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> pool_urls_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, Locations> locations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::mount
