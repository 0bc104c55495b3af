// The mount's own small HTTP endpoint (-metricsPort): GET /metrics (Prometheus text: the
// mount's counters, the read cache's kelp_cache_*, process memory) and GET /status (JSON).
//
// Thread-safety: Start/Stop from the main thread; requests are served on the server's threads
// and only read thread-safe state.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "mount/core/filesystem.h"
#include "shared/http/http_server.h"

namespace kelp::mount {

class MountStatusServer : public http::Handler {
 public:
  MountStatusServer(Filesystem* fs, std::string dir, std::string filer) : fs_(fs), dir_(std::move(dir)), filer_(std::move(filer)) {}
  absl::Status Start(int port);
  void Stop();

  bool RunInline(const http::Request&) const override { return true; }
  void Handle(http::Request& req, http::ResponseWriter& w) override;

 private:
  Filesystem* const fs_;
  const std::string dir_, filer_;
  std::unique_ptr<http::HttpServer> server_;
};

}  // namespace kelp::mount
