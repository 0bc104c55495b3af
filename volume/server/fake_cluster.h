// A stand-in for the filer's Cluster gRPC service, for tests: records heartbeats and answers
// LookupVolume from them (every server that reported a volume holds it), as the real filer
// does. Its replies' volume_size_limit and pulse_ms are settable. Can be stopped and started
// again on the same port (a filer restart).
//
// Threads: thread-safe.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/mutex.h"

namespace kelp::volume::testing {

class FakeCluster final : public cluster::Cluster::Service {
 public:
  ~FakeCluster() override { Stop(); }

  // port 0 = any free port (see port()); a later Start reuses the port.
  absl::Status Start(int port = 0);
  void Stop();
  int port() const { return port_; }

  void SetReply(uint64_t volume_size_limit, uint32_t pulse_ms);
  // Answer LookupVolume with exactly these urls for vid, whatever the heartbeats say.
  void OverrideLocations(uint32_t vid, std::vector<std::string> urls);

  int heartbeats() const;
  // The last heartbeat from the server at url ("ip:port"), if any.
  std::optional<cluster::HeartbeatRequest> LastHeartbeat(const std::string& url) const;
  // Servers ("ip:port") whose last heartbeat lists vid.
  std::vector<std::string> Holders(uint32_t vid) const;

  grpc::Status Heartbeat(grpc::ServerContext*, const cluster::HeartbeatRequest* req,
                         cluster::HeartbeatResponse* resp) override;
  grpc::Status Assign(grpc::ServerContext*, const cluster::AssignRequest*,
                      cluster::AssignResponse*) override;
  grpc::Status LookupVolume(grpc::ServerContext*, const cluster::LookupVolumeRequest* req,
                            cluster::LookupVolumeResponse* resp) override;

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  mutable Mutex mu_;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t size_limit_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t pulse_ms_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, cluster::HeartbeatRequest> last_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::vector<std::string>> overrides_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::volume::testing
