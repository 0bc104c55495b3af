// The volume server's data-plane logic, below HTTP: writes and deletes with replication,
// reads, batch deletes. The HTTP and gRPC adapters call it; it knows nothing of either wire.
//
// Replication (SeaweedFS's "xyz": 1+x+y+z copies): a write or delete that arrives from a
// client is applied here, then forwarded in parallel to every other server holding the
// volume with ?type=replicate; it succeeds only when all of them acknowledge. Replicas
// never forward. The other servers come from a LocationProvider (the filer), re-asked once
// when a forward fails.
//
// Threads: thread-safe. Write/Delete block on the network when the volume is replicated.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shared/file_id.h"
#include "shared/http/http_client.h"
#include "shared/mutex.h"
#include "shared/thread_pool.h"
#include "volume/core/location_provider.h"
#include "volume/store/store.h"

namespace kelp::volume {

class BlobService {
 public:
  // locations may be null (standalone server): replicated volumes then refuse client writes.
  BlobService(Store* store, LocationProvider* locations, http::HttpClient* client,
              ThreadPool* fanout);

  // This server's own addresses ("ip:port", public URL), never forwarded to. Set once the
  // server listens (its port may have been picked by the kernel).
  void SetSelfUrls(std::vector<std::string> urls);

  // from_client: false for a ?type=replicate request from a primary (not forwarded again).
  absl::StatusOr<Volume::WriteResult> Write(const FileId& fid, std::string_view data, bool fsync,
                                            bool from_client);
  // Returns the deleted data size.
  absl::StatusOr<uint32_t> Delete(const FileId& fid, bool fsync, bool from_client);

  struct DeleteResult {
    std::string fid;
    int status = 200;  // 200 deleted, 404 absent, else an error
    std::string error;
    uint32_t size = 0;
  };
  // Deletes on this server only (the caller, the filer, calls every replica).
  std::vector<DeleteResult> BatchDelete(const std::vector<std::string>& fids);

  // Whether a client write to vid must be forwarded (its volume keeps more than one copy).
  bool Replicated(uint32_t vid) const;

  // Makes everything written so far to the given volumes durable (fdatasync through each
  // volume's group commit, volumes in parallel). From a client, the replicated ones are also
  // synced on every other server holding them (POST /sync?type=replicate), so on success the
  // data is durable on every copy. ENOENT if a volume is not here, EIO if an fdatasync
  // failed, UNAVAILABLE if a replica could not be reached.
  absl::Status SyncVolumes(const std::vector<uint32_t>& vids, bool from_client);

 private:
  absl::StatusOr<std::shared_ptr<Volume>> GetVolume(uint32_t vid) const;
  // Sends method /fid?type=replicate[&fsync=true] with body to every other copy.
  absl::Status Forward(const Volume& v, const FileId& fid, std::string_view method,
                       std::string_view body, bool fsync);
  absl::Status ForwardOnce(const Volume& v, const std::vector<std::string>& targets,
                           std::string_view method, const std::string& target_path,
                           const http::Headers& headers, std::string_view body);

  // Runs every task (all but the last on the fan-out pool) and returns the first error.
  absl::Status RunAll(const std::vector<std::function<absl::Status()>>& tasks);
  // The other servers holding v (as many as its replication needs), after Invalidate on retry.
  absl::StatusOr<std::vector<std::string>> ReplicaTargets(const Volume& v, bool refresh);

  bool IsSelf(const std::string& url) const;

  Store* const store_;
  LocationProvider* const locations_;
  mutable Mutex mu_;
  std::vector<std::string> self_urls_ ABSL_GUARDED_BY(mu_);
  http::HttpClient* const client_;
  ThreadPool* const fanout_;
};

}  // namespace kelp::volume
