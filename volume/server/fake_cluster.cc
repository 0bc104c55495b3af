#include "volume/server/fake_cluster.h"

#include "shared/strings.h"

namespace kelp::volume::testing {

absl::Status FakeCluster::Start(int port) {
  if (port == 0) port = port_;
  grpc::ServerBuilder b;
  int selected = 0;
  b.AddListeningPort(kelp::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                     &selected);
  b.RegisterService(this);
  server_ = b.BuildAndStart();
  if (!server_ || selected == 0) return absl::UnavailableError("fake cluster: cannot listen");
  port_ = selected;
  return absl::OkStatus();
}

void FakeCluster::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
  }
}

void FakeCluster::SetReply(uint64_t volume_size_limit, uint32_t pulse_ms) {
  MutexLock l(mu_);
  size_limit_ = volume_size_limit;
  pulse_ms_ = pulse_ms;
}

void FakeCluster::OverrideLocations(uint32_t vid, std::vector<std::string> urls) {
  MutexLock l(mu_);
  overrides_[vid] = std::move(urls);
}

int FakeCluster::heartbeats() const {
  MutexLock l(mu_);
  return heartbeats_;
}

std::optional<cluster::HeartbeatRequest> FakeCluster::LastHeartbeat(const std::string& url) const {
  MutexLock l(mu_);
  auto it = last_.find(url);
  if (it == last_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> FakeCluster::Holders(uint32_t vid) const {
  MutexLock l(mu_);
  std::vector<std::string> out;
  for (const auto& [url, hb] : last_) {
    for (const auto& v : hb.volumes()) {
      if (v.id() == vid) out.push_back(url);
    }
  }
  return out;
}

grpc::Status FakeCluster::Heartbeat(grpc::ServerContext*, const cluster::HeartbeatRequest* req,
                                    cluster::HeartbeatResponse* resp) {
  MutexLock l(mu_);
  ++heartbeats_;
  last_[kelp::StrCat(req->ip(), ":", req->port())] = *req;
  resp->set_volume_size_limit(size_limit_);
  resp->set_pulse_ms(pulse_ms_);
  return grpc::Status::OK;
}

grpc::Status FakeCluster::Assign(grpc::ServerContext*, const cluster::AssignRequest*,
                                 cluster::AssignResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "fake cluster does not assign");
}

grpc::Status FakeCluster::LookupVolume(grpc::ServerContext*,
                                       const cluster::LookupVolumeRequest* req,
                                       cluster::LookupVolumeResponse* resp) {
  for (uint32_t vid : req->volume_ids()) {
    auto* v = resp->add_volumes();
    v->set_volume_id(vid);
    std::vector<std::string> urls;
    bool overridden = false;
    {
      MutexLock l(mu_);
      if (auto it = overrides_.find(vid); it != overrides_.end()) {
        urls = it->second;
        overridden = true;
      }
    }
    if (!overridden) urls = Holders(vid);
    for (const auto& u : urls) v->add_locations()->set_url(u);
  }
  return grpc::Status::OK;
}

}  // namespace kelp::volume::testing
