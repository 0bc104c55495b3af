// What the namespace (filer/core) needs from cluster coordination. Implemented by
// filer/cluster/topology.h; unit tests use a fake. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/cluster.pb.h"

namespace kelp::filer {

class ClusterApi {
 public:
  virtual ~ClusterApi() = default;

  // Reserves count consecutive needle keys on a writable volume.
  virtual absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest& req) = 0;
  virtual absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const cluster::LookupVolumeRequest& req) = 0;
  // Whether LookupVolume may wait (a round trip to another filer, or heartbeats the
  // coordinator still expects): callers on an event loop then answer it on a worker.
  virtual bool LookupMayWait() { return false; }

  struct Capacity {
    uint64_t total_bytes = 0;
    uint64_t free_bytes = 0;
  };
  virtual Capacity GetCapacity() = 0;

  // Deletes blobs from every replica. One status per fid, in order: OK when deleted or
  // already absent; an error when it must be retried later.
  virtual std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) = 0;

  // Whether this filer holds the coordinator lease (several filers on one store: only the
  // holder talks to volume servers, collects garbage and does the store-wide chores). A lone
  // filer always does.
  virtual bool IsCoordinator() { return true; }
};

}  // namespace kelp::filer
