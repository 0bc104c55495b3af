#include "volume/core/location_provider.h"

#include <grpcpp/grpcpp.h>

#include "shared/grpc_status.h"
#include "shared/strings.h"
#include "volume/core/heartbeat.h"

namespace kelp::volume {

FilerLocationProvider::FilerLocationProvider(std::string filer_grpc, std::chrono::milliseconds ttl)
    : filer_grpc_(std::move(filer_grpc)),
      ttl_(ttl),
      stub_(cluster::Cluster::NewStub(FilerChannel(filer_grpc_))) {}

absl::StatusOr<std::vector<std::string>> FilerLocationProvider::Lookup(uint32_t vid) {
  auto now = std::chrono::steady_clock::now();
  {
    MutexLock l(mu_);
    auto it = cache_.find(vid);
    if (it != cache_.end() && it->second.expires > now) return it->second.urls;
  }
  cluster::LookupVolumeRequest req;
  req.add_volume_ids(vid);
  cluster::LookupVolumeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  grpc::Status s = stub_->LookupVolume(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::UnavailableError(kelp::StrCat("looking up volume ", vid, " at filer ", filer_grpc_,
                                               ": ", s.error_message()));
  }
  std::vector<std::string> urls;
  for (const auto& v : resp.volumes()) {
    if (v.volume_id() != vid) continue;
    if (!v.error().empty())
      return absl::UnavailableError(kelp::StrCat("volume ", vid, ": ", v.error()));
    for (const auto& loc : v.locations()) urls.push_back(loc.url());
  }
  MutexLock l(mu_);
  cache_[vid] = Entry{urls, now + ttl_};
  return urls;
}

void FilerLocationProvider::Invalidate(uint32_t vid) {
  MutexLock l(mu_);
  cache_.erase(vid);
}

}  // namespace kelp::volume
