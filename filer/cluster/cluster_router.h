// The ClusterApi the namespace core and the HTTP routes use: this filer's Topology while it
// holds the coordinator lease (lease.h), else the coordinator's Cluster service over gRPC.
// So any filer answers Assign and LookupVolume; only the coordinator deletes blobs (the GC
// queue is worked by it alone), and the others answer statfs from the capacity the
// coordinator publishes with its lease.
//
// Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "filer/cluster/cluster_api.h"
#include "filer/cluster/lease.h"
#include "filer/cluster/topology.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/mutex.h"

namespace kelp::filer {

class ClusterRouter : public ClusterApi {
 public:
  // Neither is owned; both must outlive the router.
  ClusterRouter(Topology* local, CoordinatorLease* lease);

  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest& req) override;
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const cluster::LookupVolumeRequest& req) override;
  Capacity GetCapacity() override;
  std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) override;
  bool IsCoordinator() override { return lease_->IsHolder(); }
  bool LookupMayWait() override { return !lease_->IsHolder() || local_->LookupMayWait(); }

  // gRPC metadata key on requests one filer forwards to another.
  static constexpr std::string_view kForwardedHeader = "kelp-forwarded-by";

  // The coordinator's gRPC address when it is another filer ("" when this one is, or none is
  // known): where volume servers should heartbeat.
  std::string RemoteCoordinator() const;

 private:
  absl::StatusOr<cluster::Cluster::Stub*> Remote();

  Topology* const local_;
  CoordinatorLease* const lease_;
  Mutex mu_;
  std::string remote_address_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<cluster::Cluster::Stub> remote_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::filer
