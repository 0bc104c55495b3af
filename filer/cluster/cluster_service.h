// Transport adapters for cluster coordination: the gRPC Cluster service and the SeaweedFS
// master HTTP routes (/dir/assign, /dir/lookup, /dir/status). Both are thin: parse, call
// Topology, convert the Status once. Thread-safe (Topology is).
#pragma once

#include "filer/cluster/cluster_router.h"
#include "filer/cluster/topology.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/http/http_server.h"

namespace kelp::filer {

class ClusterGrpcService final : public cluster::Cluster::Service {
 public:
  // router (optional): when this filer is not the coordinator, heartbeats are answered with
  // the coordinator's address (HeartbeatResponse.leader) and Assign/LookupVolume forwarded.
  explicit ClusterGrpcService(Topology* topology, ClusterRouter* router = nullptr)
      : topology_(topology), router_(router) {}
  grpc::Status Heartbeat(grpc::ServerContext*, const cluster::HeartbeatRequest* req,
                         cluster::HeartbeatResponse* resp) override;
  grpc::Status Assign(grpc::ServerContext*, const cluster::AssignRequest* req, cluster::AssignResponse* resp) override;
  grpc::Status LookupVolume(grpc::ServerContext*, const cluster::LookupVolumeRequest* req,
                            cluster::LookupVolumeResponse* resp) override;

 private:
  Topology* topology_;
  ClusterRouter* router_;
};

// Routes under /dir/. Returns false from Serve when the path is not one of them.
class ClusterHttpRoutes {
 public:
  // api: where Assign and LookupVolume go (the router on a filer that shares its store);
  // nullptr = topology.
  explicit ClusterHttpRoutes(Topology* topology, ClusterApi* api = nullptr)
      : topology_(topology), api_(api ? api : topology) {}
  static bool Owns(const http::Request& req);
  // Assign can run on the event loop when no volume growth is needed.
  bool RunInline(const http::Request& req) const;
  void Serve(http::Request& req, http::ResponseWriter& w);

 private:
  void Assign(http::Request& req, http::ResponseWriter& w);
  void Lookup(http::Request& req, http::ResponseWriter& w);
  Topology* topology_;
  ClusterApi* api_;
};

}  // namespace kelp::filer
