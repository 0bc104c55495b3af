// Blob I/O of the HTTP data plane: upload a blob to a volume server, stream a byte range of
// one back, and drop blobs that were uploaded but never committed. BlobIo is the narrow
// interface content.h works against (tests fake it); VolumeBlobIo implements it over the
// in-process ClusterApi (Assign, LookupVolume, DeleteBlobs) and the volume servers' HTTP
// data plane (volume/client).
//
// Threads: thread-safe; one instance serves every request. No lock is held across I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/cluster/cluster_api.h"
#include "shared/metrics.h"
#include "volume/client/volume_client.h"

namespace kelp::filer {

using ByteSink = std::function<absl::Status(std::string_view)>;

class BlobIo {
 public:
  virtual ~BlobIo() = default;
  // Stores data as a new blob; returns its fid.
  virtual absl::StatusOr<std::string> Put(std::string_view data) = 0;
  // Delivers bytes [offset, offset + length) of blob fid to sink, in order, each byte once,
  // falling back to another replica if one fails part way. An error from sink is returned
  // as is, without trying elsewhere.
  virtual absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length,
                           const ByteSink& sink) = 0;
  // Best-effort delete of blobs that no chunk record references (an aborted upload).
  virtual void Discard(const std::vector<std::string>& fids) = 0;
};

// Reads [offset, offset + length) of one blob from its replicas in turn: read(url, off,
// len, sink) asks one replica; a replica that fails or comes up short is resumed on the next
// from the first byte the sink has not taken. Returns the last replica's error when none
// finishes (and sink errors at once). *failovers counts replicas that failed.
using RangeReader = std::function<absl::Status(const std::string& url, uint64_t offset,
                                               uint64_t length, const ByteSink& sink)>;
absl::Status ReadWithFailover(const std::vector<std::string>& urls, uint64_t offset,
                              uint64_t length, const RangeReader& read, const ByteSink& sink,
                              int* failovers);

class VolumeBlobIo : public BlobIo {
 public:
  struct Options {
    // Replication and collection of new blobs; "" = the cluster default.
    std::string replication;
    std::string collection;
    // Attempts of one upload, each on a freshly assigned fid (so another volume, maybe
    // another server, after a failure). Default: 3.
    int put_attempts = 3;
  };
  // cluster and client are not owned and must outlive this.
  VolumeBlobIo(ClusterApi* cluster, volume::VolumeClient* client, Options options);

  absl::StatusOr<std::string> Put(std::string_view data) override;
  absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length,
                   const ByteSink& sink) override;
  void Discard(const std::vector<std::string>& fids) override;

 private:
  ClusterApi* const cluster_;
  volume::VolumeClient* const client_;
  const Options opts_;
  Counter* put_bytes_;
  Counter* get_bytes_;
  Counter* put_retries_;
  Counter* get_failovers_;
};

}  // namespace kelp::filer
