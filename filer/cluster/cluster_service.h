// Transport adapters for cluster coordination: the gRPC Cluster service and the SeaweedFS
// master HTTP routes (/dir/assign, /dir/lookup, /dir/status). Both are thin: parse, call
// Topology, convert the Status once. Thread-safe (Topology is).
#pragma once

#include "filer/cluster/topology.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/http/http_server.h"

namespace kelp::filer {

class ClusterGrpcService final : public cluster::Cluster::Service {
 public:
  explicit ClusterGrpcService(Topology* topology) : topology_(topology) {}
  grpc::Status Heartbeat(grpc::ServerContext*, const cluster::HeartbeatRequest* req,
                         cluster::HeartbeatResponse* resp) override;
  grpc::Status Assign(grpc::ServerContext*, const cluster::AssignRequest* req, cluster::AssignResponse* resp) override;
  grpc::Status LookupVolume(grpc::ServerContext*, const cluster::LookupVolumeRequest* req,
                            cluster::LookupVolumeResponse* resp) override;

 private:
  Topology* topology_;
};

// Routes under /dir/. Returns false from Serve when the path is not one of them.
class ClusterHttpRoutes {
 public:
  explicit ClusterHttpRoutes(Topology* topology) : topology_(topology) {}
  static bool Owns(const http::Request& req);
  // Assign can run on the event loop when no volume growth is needed.
  bool RunInline(const http::Request& req) const;
  void Serve(http::Request& req, http::ResponseWriter& w);

 private:
  void Assign(http::Request& req, http::ResponseWriter& w);
  void Lookup(http::Request& req, http::ResponseWriter& w);
  Topology* topology_;
};

}  // namespace kelp::filer
