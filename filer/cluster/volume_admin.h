// The filer's calls to volume servers' control plane (gRPC VolumeService), behind an
// interface so topology tests can fake a cluster. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/volume.pb.h"

namespace kelp::filer {

class VolumeAdmin {
 public:
  virtual ~VolumeAdmin() = default;
  // grpc_address: "ip:port" of the volume server's gRPC listener.
  virtual absl::Status AllocateVolume(const std::string& grpc_address, uint32_t volume_id,
                                      const std::string& collection, const std::string& replication) = 0;
  virtual absl::StatusOr<volume::BatchDeleteResponse> BatchDelete(const std::string& grpc_address,
                                                                  const std::vector<std::string>& fids) = 0;
};

// Talks gRPC, one cached channel per server, with a deadline per call.
std::unique_ptr<VolumeAdmin> NewGrpcVolumeAdmin(int deadline_ms = 10000);

}  // namespace kelp::filer
