#include "filer/cluster/cluster_router.h"

#include <grpcpp/grpcpp.h>

#include "shared/grpc_status.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr auto kForwardDeadline = std::chrono::seconds(30);

}  // namespace

ClusterRouter::ClusterRouter(Topology* local, CoordinatorLease* lease) : local_(local), lease_(lease) {}

std::string ClusterRouter::RemoteCoordinator() const {
  if (lease_->IsHolder()) return "";
  auto h = lease_->holder();
  return h ? h->grpc_address : "";
}

absl::StatusOr<cluster::Cluster::Stub*> ClusterRouter::Remote() {
  std::string addr = RemoteCoordinator();
  if (addr.empty()) return absl::UnavailableError("no coordinator filer is known yet");
  MutexLock lock(mu_);
  if (addr != remote_address_ || !remote_) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    remote_ = cluster::Cluster::NewStub(grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
    remote_address_ = addr;
  }
  return remote_.get();
}

absl::StatusOr<cluster::AssignResponse> ClusterRouter::Assign(const cluster::AssignRequest& req) {
  if (lease_->IsHolder()) return local_->Assign(req);
  ASSIGN_OR_RETURN(cluster::Cluster::Stub * stub, Remote());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kForwardDeadline);
  ctx.AddMetadata(std::string(kForwardedHeader), "filer");
  cluster::AssignResponse resp;
  RETURN_IF_ERROR(FromGrpcStatus(stub->Assign(&ctx, req, &resp)));
  return resp;
}

absl::StatusOr<cluster::LookupVolumeResponse> ClusterRouter::LookupVolume(const cluster::LookupVolumeRequest& req) {
  if (lease_->IsHolder()) return local_->LookupVolume(req);
  ASSIGN_OR_RETURN(cluster::Cluster::Stub * stub, Remote());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kForwardDeadline);
  ctx.AddMetadata(std::string(kForwardedHeader), "filer");
  cluster::LookupVolumeResponse resp;
  RETURN_IF_ERROR(FromGrpcStatus(stub->LookupVolume(&ctx, req, &resp)));
  return resp;
}

ClusterApi::Capacity ClusterRouter::GetCapacity() {
  if (lease_->IsHolder()) return local_->GetCapacity();
  Capacity c;
  if (auto h = lease_->holder()) {
    c.total_bytes = h->total_bytes;
    c.free_bytes = h->free_bytes;
  }
  return c;
}

std::vector<absl::Status> ClusterRouter::DeleteBlobs(const std::vector<std::string>& fids) {
  if (lease_->IsHolder()) return local_->DeleteBlobs(fids);
  return std::vector<absl::Status>(fids.size(), absl::UnavailableError("only the coordinator filer deletes blobs"));
}

}  // namespace kelp::filer
