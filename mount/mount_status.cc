#include "mount/mount_status.h"

#include <nlohmann/json.hpp>

#include "shared/metrics.h"

namespace kelp::mount {

absl::Status MountStatusServer::Start(int port) {
  RegisterProcessMetrics();
  http::HttpServer::Options o;
  o.port = port;
  o.loop_threads = 1;
  o.worker_threads = 2;
  o.name = "mount-http";
  server_ = std::make_unique<http::HttpServer>(o, this);
  return server_->Start();
}

void MountStatusServer::Stop() {
  if (server_) server_->Stop();
}

void MountStatusServer::Handle(http::Request& req, http::ResponseWriter& w) {
  if (http::ServeMetrics(req, w)) return;
  if (req.path() == "/status") {
    nlohmann::json j;
    j["dir"] = dir_;
    j["filer"] = filer_;
    j["open_files"] = fs_->inodes().OpenInodes().size();
    j["known_inodes"] = fs_->inodes().size();
    j["dirty_bytes"] = fs_->dirty_bytes();
    j["resident_bytes"] = ResidentBytes();
    w.SendJson(200, j.dump());
    return;
  }
  w.SendError(404, "not found: try /metrics or /status");
}

}  // namespace kelp::mount
