#include "filer/cluster/volume_admin.h"

#include <chrono>
#include <map>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "proto/volume.grpc.pb.h"
#include "shared/grpc_status.h"
#include "shared/mutex.h"
#include "shared/security/security.h"

namespace kelp::filer {
namespace {

class GrpcVolumeAdmin : public VolumeAdmin {
 public:
  explicit GrpcVolumeAdmin(int deadline_ms) : deadline_ms_(deadline_ms) {}

  absl::Status AllocateVolume(const std::string& addr, uint32_t vid, const std::string& collection,
                              const std::string& replication) override {
    volume::AllocateVolumeRequest req;
    req.set_volume_id(vid);
    req.set_collection(collection);
    req.set_replication(replication);
    volume::AllocateVolumeResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    return FromGrpcStatus(Stub(addr)->AllocateVolume(&ctx, req, &resp));
  }

  absl::StatusOr<volume::BatchDeleteResponse> BatchDelete(const std::string& addr,
                                                          const std::vector<std::string>& fids) override {
    volume::BatchDeleteRequest req;
    for (const auto& f : fids) req.add_fids(f);
    volume::BatchDeleteResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    absl::Status s = FromGrpcStatus(Stub(addr)->BatchDelete(&ctx, req, &resp));
    if (!s.ok()) return s;
    return resp;
  }

 private:
  void SetDeadline(grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms_));
  }
  volume::VolumeService::Stub* Stub(const std::string& addr) {
    MutexLock lock(mu_);
    auto& s = stubs_[addr];
    if (!s) s = volume::VolumeService::NewStub(grpc::CreateChannel(addr, security::ChannelCredentials()));
    return s.get();
  }

  const int deadline_ms_;
  Mutex mu_;
  std::map<std::string, std::unique_ptr<volume::VolumeService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<VolumeAdmin> NewGrpcVolumeAdmin(int deadline_ms) {
  return std::make_unique<GrpcVolumeAdmin>(deadline_ms);
}

}  // namespace kelp::filer
