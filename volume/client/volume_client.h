// The client side of the volume server, and the only part of volume/ other services link
// (target volume_client): upload, ranged read, delete over HTTP with keep-alive pooling, and
// batch delete over gRPC.
//
// Tokens (docs/security.md): uploads carry the one Assign returned; reads and deletes carry
// one signed here when this process's security.toml holds the read or write key.
//
// Errors carry the errno the FUSE edge should return: 401 -> EACCES, 404 -> ENOENT, 507 -> ENOSPC,
// 413 -> EFBIG, 403 (read-only volume) -> EROFS, 400 -> EINVAL, 416 -> OutOfRange,
// 503 and transport failures (refused, reset, timed out) -> UNAVAILABLE (EIO), other 5xx -> EIO.
//
// Threads: thread-safe; share one instance. Each call uses its own pooled connection.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "proto/volume.pb.h"
#include "shared/http/http_client.h"
#include "volume/client/blob_store.h"
#include "volume/client/local_reader.h"

namespace kelp::volume {

class VolumeClient {
 public:
  struct Options {
    int connect_timeout_ms = 3000;  // per connection attempt
    int io_timeout_ms = 30000;      // per socket read/write
    size_t max_idle_per_host = 64;  // pooled keep-alive connections per server
  };
  VolumeClient();
  explicit VolumeClient(Options options);
  ~VolumeClient();

  struct UploadResult {
    uint64_t size = 0;
    std::string etag;  // without quotes
  };
  // PUTs data as blob fid on the server at location ("host:port"). fsync: durable on every
  // replica before the reply. auth: the token Assign returned with fid ("" = none, or one
  // signed here when this process holds [jwt.signing]).
  absl::StatusOr<UploadResult> Upload(std::string_view location, std::string_view fid,
                                      std::string_view data, bool fsync = false,
                                      std::string_view auth = {});

  // Reads length bytes of blob fid from offset (length 0 = to the end).
  absl::StatusOr<std::string> Read(std::string_view location, std::string_view fid,
                                   uint64_t offset = 0, uint64_t length = 0);
  // The same, delivering the bytes to sink in pieces as they arrive (received straight into
  // the sink's buffer when it names one large enough); an error from sink aborts the transfer
  // and is returned.
  absl::Status Read(std::string_view location, std::string_view fid, uint64_t offset,
                    uint64_t length, const ByteSink& sink);

  // Where blob fid sits in its volume's .dat on the server at location, for a reader on the
  // same machine (docs/volume-http.md, "Local reads"). EROFS (the server's 403) when the server
  // does not answer this to us; ENOENT if absent; Unimplemented if the answer lacks its fields
  // (a server that does not know local reads).
  absl::StatusOr<NeedleLocation> Locate(std::string_view location, std::string_view fid);

  // Makes every blob written so far to these volumes durable on every replica (POST
  // /sync?volumes=, docs/volume-http.md) on the server at location.
  absl::Status Sync(std::string_view location, const std::vector<uint32_t>& volume_ids);

  // Deletes blob fid (and its replicas); returns the bytes freed. ENOENT if absent.
  absl::StatusOr<uint64_t> Delete(std::string_view location, std::string_view fid);

  struct DeleteResult {
    std::string fid;
    int status = 0;  // 200 deleted, 404 absent, 400 malformed, else an error
    std::string error;
    uint64_t size = 0;
  };
  // Deletes many blobs on one server (gRPC "host:port"), that server only: call it for every
  // location of the volumes concerned.
  absl::StatusOr<std::vector<DeleteResult>> BatchDelete(std::string_view grpc_address,
                                                        const std::vector<std::string>& fids);
  // Every live blob of volume volume_id on server grpc_address (paged ListBlobs calls):
  // fid and size, status 200. NotFound (ENOENT) if the server does not hold the volume.
  absl::StatusOr<std::vector<BlobStat>> ListBlobs(std::string_view grpc_address,
                                                  uint32_t volume_id);

  // Which of fids server grpc_address holds (no data is read): one BlobStat per fid, in
  // order; status 200 held, 404 absent, 400 malformed. For kelp filer.fsck.
  absl::StatusOr<std::vector<BlobStat>> StatBlobs(std::string_view grpc_address,
                                                  const std::vector<std::string>& fids);

  // The rest of the control plane (proto/volume.proto), for the filer. All take the server's
  // gRPC "host:port"; errors keep their errno (EEXIST, ENOENT, ENOSPC for -max reached).
  absl::Status AllocateVolume(std::string_view grpc_address, uint32_t volume_id,
                              std::string_view collection, std::string_view replication);
  absl::StatusOr<StatusResponse> GetStatus(std::string_view grpc_address);
  absl::Status SetReadOnly(std::string_view grpc_address, uint32_t volume_id, bool read_only);
  // threshold 0 = the server's -garbageThreshold; volume_id 0 = every volume over it.
  absl::StatusOr<VacuumResponse> Vacuum(std::string_view grpc_address, uint32_t volume_id,
                                        double threshold = 0);
  absl::Status DeleteVolume(std::string_view grpc_address, uint32_t volume_id);

 private:
  struct Stubs;
  http::HttpClient http_;
  std::unique_ptr<Stubs> stubs_;
};

// The Status for an HTTP error response from a volume server (exposed for tests).
absl::Status StatusFromHttp(int status, std::string_view body, std::string_view what);

}  // namespace kelp::volume
