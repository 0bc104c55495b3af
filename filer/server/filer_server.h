// The filer process: its RocksDB store, cluster coordination (Topology), the gRPC server
// (Cluster service for volume servers) and the HTTP server on one port (SeaweedFS master
// routes /dir/*, /metrics, /status, the filer's file APIs, and the metadata API for mounts on
// connections upgraded to shared/rpc frames).
// Start/Stop from one thread; everything it serves is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "filer/cluster/cluster_router.h"
#include "filer/cluster/cluster_service.h"
#include "filer/cluster/lease.h"
#include "filer/cluster/topology.h"
#include "filer/core/filer_service.h"
#include "filer/rpc/filer_rpc_service.h"
#include "filer/http/filer_http.h"
#include "filer/store/kv_store.h"
#include "filer/store/open_store.h"
#include "shared/http/http_server.h"
#include "shared/rpc/server.h"

namespace kelp::filer {

struct FilerServerOptions {
  // Data directory; the RocksDB store lives in <dir>/meta. Default: ./filerdata.
  std::string dir = "./filerdata";
  // The metadata store (-store, -store.dsn...): RocksDB under dir, or PostgreSQL shared with
  // other filers (docs/filer-stores.md).
  StoreOptions store;
  // Filers sharing a store: how long the coordinator lease lasts without renewal, in ms; a
  // dead coordinator is replaced after about this long. Default: 6000.
  uint32_t coordinator_lease_ms = 6000;
  // Address to bind. Default: 127.0.0.1.
  std::string ip = "127.0.0.1";
  // HTTP port; 0 = any free port. Default: 8888.
  int port = 8888;
  // gRPC port; 0 = port + 10000 (any free port when port is 0).
  int grpc_port = 0;
  // Volume size limit, in MiB. Default: 30000.
  uint64_t volume_size_limit_mb = 30000;
  // Replication for writes that name none ("xyz"). Default: 000.
  std::string default_replication = "000";
  // Heartbeat interval asked of volume servers, in ms. Default: 1000.
  uint32_t pulse_ms = 1000;
  // Volumes allocated per growth; 0 = by copies.
  int growth_count = 0;
  // HTTP event-loop threads; 0 = number of cores.
  int http_threads = 0;
  // HTTP worker threads: requests that stream bodies or call volume servers, at once.
  // Default: 64.
  int http_workers = 64;
  // Event loops of the metadata RPC transport (connections upgraded on the HTTP port);
  // 0 = number of cores.
  int rpc_threads = 0;
  // Its workers: calls that wait on a WAL sync or another server, at once. Default: 32.
  int rpc_workers = 32;
  // The HTTP file APIs' options (-maxMB...).
  FilerHttpOptions http;
  // The namespace core's options (sessions, GC, event retention...).
  FilerOptions core;
  // Testing only (-testing.powerCut): see RocksKvOptions::testing_power_cut. Default: false.
  bool testing_power_cut = false;
};

class FilerServer {
 public:
  explicit FilerServer(FilerServerOptions options);
  ~FilerServer();

  absl::Status Start();
  void Stop();

  int http_port() const { return http_ ? http_->port() : 0; }
  int grpc_port() const { return grpc_port_; }
  Topology* topology() { return topology_.get(); }
  CoordinatorLease* lease() { return lease_.get(); }
  FilerService* core() { return core_.get(); }
  KvStore* kv() { return kv_.get(); }

 private:
  class HttpHandler;

  FilerServerOptions opts_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<VolumeAdmin> admin_;
  std::unique_ptr<Topology> topology_;
  std::unique_ptr<CoordinatorLease> lease_;
  std::unique_ptr<ClusterRouter> router_;
  std::unique_ptr<FilerService> core_;
  std::unique_ptr<ClusterGrpcService> cluster_service_;
  std::unique_ptr<FilerRpcService> rpc_service_;
  std::unique_ptr<rpc::Server> rpc_;
  std::unique_ptr<grpc::Server> grpc_;
  int grpc_port_ = 0;
  std::unique_ptr<FilerHttpApi> http_api_;
  std::unique_ptr<HttpHandler> http_handler_;
  std::unique_ptr<http::HttpServer> http_;
  bool started_ = false;
};

}  // namespace kelp::filer
