#include "volume/core/heartbeat.h"

#include <grpcpp/grpcpp.h>

#include "shared/log.h"
#include "shared/security/security.h"

namespace kelp::volume {

void FillVolumeInfo(const Volume& v, kelp::volume::VolumeInfo* info) {
  Volume::Stats s = v.GetStats();
  info->set_id(v.id());
  info->set_collection(v.collection());
  info->set_replication(v.replication());
  info->set_size(s.size);
  info->set_file_count(s.file_count);
  info->set_delete_count(s.delete_count);
  info->set_deleted_bytes(s.deleted_bytes);
  info->set_read_only(s.read_only);
  info->set_max_key(s.max_key);
}

Heartbeater::Heartbeater(Options options, Store* store) : opts_(std::move(options)), store_(store) {}

std::string Heartbeater::Target() const {
  if (!leader_.empty()) return leader_;
  return opts_.filers_grpc.empty() ? "" : opts_.filers_grpc[next_filer_ % opts_.filers_grpc.size()];
}

std::shared_ptr<grpc::Channel> FilerChannel(const std::string& address) {
  grpc::ChannelArguments args;
  // gRPC's default reconnect back-off grows to two minutes; a restarted filer should see
  // this server again within a pulse or two.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, security::ChannelCredentials(), args);
}

Heartbeater::~Heartbeater() { Stop(); }

void Heartbeater::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "vol-heartbeat");
    Run();
  });
}

void Heartbeater::Stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void Heartbeater::Trigger() {
  {
    MutexLock l(mu_);
    triggered_ = true;
  }
  cv_.NotifyAll();
}

cluster::HeartbeatRequest Heartbeater::BuildRequest() const {
  cluster::HeartbeatRequest req;
  req.set_ip(opts_.ip);
  req.set_port(opts_.port);
  req.set_grpc_port(opts_.grpc_port);
  req.set_public_url(opts_.public_url);
  req.set_data_center(opts_.data_center);
  req.set_rack(opts_.rack);
  req.set_max_volumes(store_->max_volumes());
  if (auto du = store_->GetDiskUsage(); du.ok()) {
    req.set_disk_free(du->free);
    req.set_disk_total(du->total);
  }
  for (const auto& v : store_->List()) FillVolumeInfo(*v, req.add_volumes());
  return req;
}

void Heartbeater::Run() {
  int pulse_ms = opts_.pulse_ms > 0 ? opts_.pulse_ms : 1000;
  size_t quick_tries = 0;
  bool outage_logged = false;
  for (;;) {
    std::string target = Target();
    if (target != stub_target_) {
      stub_ = cluster::Cluster::NewStub(FilerChannel(target));
      stub_target_ = target;
    }
    cluster::HeartbeatRequest req = BuildRequest();
    cluster::HeartbeatResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(std::max(pulse_ms * 3, 3000)));
    {
      MutexLock l(mu_);
      if (stop_) return;
      active_ = &ctx;
    }
    grpc::Status s = stub_->Heartbeat(&ctx, req, &resp);
    {
      MutexLock l(mu_);
      active_ = nullptr;
      if (stop_) return;
    }
    bool retry_now = false;
    if (s.ok() && !resp.leader().empty()) {
      // Not the coordinator: go there (at once), unless it names itself, which it never should.
      if (resp.leader() != target) {
        if (resp.leader() != leader_) {
          spdlog::info("volume server {}:{}: filer {} points to the coordinator {}", opts_.ip, opts_.port, target,
                       resp.leader());
        }
        leader_ = resp.leader();
        retry_now = true;
      } else {
        s = grpc::Status(grpc::StatusCode::UNAVAILABLE, "filer names itself coordinator but would not record");
      }
    } else if (s.ok()) {
      quick_tries = 0;
      if (!connected_.exchange(true) || outage_logged) {
        spdlog::info("volume server {}:{}: heartbeating to filer {}", opts_.ip, opts_.port, target);
      }
      outage_logged = false;
      beats_.fetch_add(1);
      if (resp.volume_size_limit() > 0) store_->SetVolumeSizeLimit(resp.volume_size_limit());
      if (resp.pulse_ms() > 0) pulse_ms = static_cast<int>(resp.pulse_ms());
    }
    if (!s.ok()) {
      connected_ = false;
      if (!outage_logged) {
        spdlog::warn("volume server {}:{}: heartbeat to filer {} failed ({}); retrying every {} ms",
                     opts_.ip, opts_.port, target, s.error_message(), pulse_ms);
        outage_logged = true;
      }
      // The coordinator went away: ask the filers in turn who holds it now. A plain filer
      // failed: try the next one.
      if (!leader_.empty()) {
        leader_.clear();
      } else {
        ++next_filer_;
      }
      retry_now = true;
    }
    // Redirects and failovers go at once, but at most one round of the list per pulse (two
    // filers pointing at each other, or all of them down, must not make a busy loop).
    if (retry_now && ++quick_tries < opts_.filers_grpc.size() + 1) continue;
    quick_tries = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(pulse_ms);
    MutexLock l(mu_);
    while (!stop_ && !triggered_ && cv_.WaitUntil(l, deadline)) {
    }
    if (stop_) return;
    triggered_ = false;
  }
}

}  // namespace kelp::volume
