// The gRPC control plane of a volume server (proto/volume.proto, service VolumeService):
// allocate, batch delete, blob stat and listing (fsck), vacuum, status, read-only switch, delete volume. A thin adapter:
// the logic is in Store, BlobService and VacuumVolumes.
//
// Threads: called by gRPC's server threads concurrently; thread-safe.
#pragma once

#include <functional>

#include "proto/volume.grpc.pb.h"
#include "volume/core/blob_service.h"
#include "volume/store/store.h"

namespace kelp::volume {

class VolumeGrpcService final : public kelp::volume::VolumeService::Service {
 public:
  // default_threshold: garbage ratio used when a Vacuum request gives none. on_change runs
  // after a volume is created, deleted or switched read-only (to heartbeat at once); may be empty.
  VolumeGrpcService(Store* store, BlobService* blobs, double default_threshold,
                    std::function<void()> on_change);

  grpc::Status AllocateVolume(grpc::ServerContext*, const AllocateVolumeRequest* req,
                              AllocateVolumeResponse* resp) override;
  grpc::Status BatchDelete(grpc::ServerContext*, const BatchDeleteRequest* req,
                           BatchDeleteResponse* resp) override;
  grpc::Status StatBlobs(grpc::ServerContext*, const StatBlobsRequest* req,
                         StatBlobsResponse* resp) override;
  grpc::Status ListBlobs(grpc::ServerContext*, const ListBlobsRequest* req,
                         ListBlobsResponse* resp) override;
  grpc::Status Vacuum(grpc::ServerContext*, const VacuumRequest* req,
                      VacuumResponse* resp) override;
  grpc::Status Status(grpc::ServerContext*, const StatusRequest* req,
                      StatusResponse* resp) override;
  grpc::Status SetReadOnly(grpc::ServerContext*, const SetReadOnlyRequest* req,
                           SetReadOnlyResponse* resp) override;
  grpc::Status DeleteVolume(grpc::ServerContext*, const DeleteVolumeRequest* req,
                            DeleteVolumeResponse* resp) override;

 private:
  void Changed() const {
    if (on_change_) on_change_();
  }
  Store* const store_;
  BlobService* const blobs_;
  const double default_threshold_;
  const std::function<void()> on_change_;
};

}  // namespace kelp::volume
