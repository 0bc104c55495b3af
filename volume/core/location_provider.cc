#include "volume/core/location_provider.h"

#include <grpcpp/grpcpp.h>

#include "shared/grpc_status.h"
#include "shared/strings.h"
#include "volume/core/heartbeat.h"

namespace kelp::volume {

FilerLocationProvider::FilerLocationProvider(std::vector<std::string> filers_grpc, std::chrono::milliseconds ttl)
    : filers_grpc_(std::move(filers_grpc)), ttl_(ttl) {
  for (const auto& f : filers_grpc_) stubs_.push_back(cluster::Cluster::NewStub(FilerChannel(f)));
}

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
  size_t first;
  {
    MutexLock l(mu_);
    first = preferred_;
  }
  grpc::Status s;
  for (size_t i = 0; i < stubs_.size(); ++i) {
    size_t k = (first + i) % stubs_.size();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    s = stubs_[k]->LookupVolume(&ctx, req, &resp);
    if (s.ok()) {
      MutexLock l(mu_);
      preferred_ = k;
      break;
    }
  }
  if (!s.ok()) {
    return absl::UnavailableError(kelp::StrCat("looking up volume ", vid, " at the filers: ", s.error_message()));
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
