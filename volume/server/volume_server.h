// A complete volume server: the store of volumes in one directory, the HTTP data plane, the
// gRPC control plane, heartbeats to the filer and the background vacuum. Used by
// `kelp volume`, by `kelp server` (embedded beside a filer) and in-process by tests.
//
//   kelp::volume::VolumeServer::Options o;
//   o.dir = "/data/vol"; o.port = 8080; o.filer = "127.0.0.1:8888";
//   kelp::volume::VolumeServer server(o);
//   RETURN_IF_ERROR(server.Start());   // listening once this returns
//   ...
//   server.Stop();                     // or let the destructor do it
//
// Threads: Start and Stop from one owner thread; the accessors from any thread after Start.
// Stop waits for the background threads (heartbeat, vacuum) and in-flight requests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace grpc {
class Server;
}

namespace kelp {
class ThreadPool;
namespace http {
class HttpClient;
class HttpServer;
}  // namespace http
}  // namespace kelp

namespace kelp::volume {

class BlobService;
class Env;
class Heartbeater;
class LocationProvider;
class Store;
class VacuumLoop;
class VolumeGrpcService;
class VolumeHttpHandler;
class VolumeMetrics;

class VolumeServer {
 public:
  struct Options {
    // Directory of the volume files (<vid>.dat/.idx, <collection>_<vid>.dat/.idx); created
    // if missing. Default: "." (flag -dir).
    std::string dir = ".";
    // Address to listen on and to advertise to the filer. Default: "127.0.0.1" (-ip).
    std::string ip = "127.0.0.1";
    // HTTP data-plane port; 0 picks a free port (see http_port()). Default: 8080 (-port).
    int port = 8080;
    // gRPC control-plane port; 0 = port + 10000, or a free port when port is 0. (-port.grpc)
    int grpc_port = 0;
    // "host:port" clients should use to reach this server; "" = ip:port. (-publicUrl)
    std::string public_url;
    // Most volumes this server will hold. Default: 8 (-max).
    uint32_t max_volumes = 8;
    // A volume at or over this size, in MiB, turns read-only. The filer may lower it.
    // Default: 30000 (-volumeSizeLimitMB).
    uint64_t volume_size_limit_mb = 30000;
    // Largest blob accepted, in MiB; larger uploads get 413. Default: 256 (-fileSizeLimitMB).
    uint64_t file_size_limit_mb = 256;
    // The filer's HTTP "host:port" (its gRPC port is derived as port + 10000 unless
    // filer_grpc_port is set), or several, comma-separated, of filers sharing one store:
    // heartbeats go to their coordinator. "" = standalone: no heartbeats, and replicated
    // volumes refuse client writes. Default: "localhost:8888" (-filer, alias -master, -mserver).
    std::string filer = "localhost:8888";
    int filer_grpc_port = 0;
    // Placement labels reported to the filer for replication. (-dataCenter, -rack)
    std::string data_center;
    std::string rack;
    // Vacuum a volume when garbage / size reaches this fraction. Default: 0.3 (-garbageThreshold).
    double garbage_threshold = 0.3;
    // How often the background vacuum checks, in seconds; 0 turns it off.
    // Default: 900 (-vacuumIntervalSec).
    int vacuum_interval_sec = 900;
    // Heartbeat period in ms until the filer's reply says otherwise. Default: 1000 (-pulseMs).
    int pulse_ms = 1000;
    // HTTP event-loop threads (0 = one per core) and worker threads for requests that block
    // (large bodies, fsync, replication). Defaults: 0 and 64 (-http.loops, -http.workers).
    int http_loop_threads = 0;
    int http_worker_threads = 64;
    // Blobs up to this many bytes are served on the event loop. Default: 65536.
    uint32_t inline_read_max = 64 << 10;
    // Upload bodies buffered at once, in MiB; more uploads wait (then get 503).
    // Default: 256 (-concurrentUploadLimitMB).
    uint64_t concurrent_upload_limit_mb = 256;

    // For tests: the file system (nullptr = the real one), and where replicas are found
    // (nullptr = ask the filer). Not owned; must outlive the server.
    Env* env = nullptr;
    LocationProvider* locations = nullptr;
    // Testing only (-testing.powerCut): when env is nullptr, the volumes' writes stay in this
    // process's memory until an fdatasync covers them (volume/store/power_cut_env.h), so a
    // kill -9 loses what a power cut would. Default: false.
    bool testing_power_cut = false;
  };

  explicit VolumeServer(Options options);
  ~VolumeServer();  // Stop()
  VolumeServer(const VolumeServer&) = delete;
  VolumeServer& operator=(const VolumeServer&) = delete;

  // Loads the volumes and starts listening. Fails if a port is taken or dir is unusable.
  absl::Status Start();
  void Stop();

  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  std::string url() const;           // ip:http_port
  std::string grpc_address() const;  // ip:grpc_port
  Store& store() { return *store_; }
  // The background loops, for tests; nullptr when off (vacuum_interval_sec 0, no filer).
  VacuumLoop* vacuum_loop() { return vacuum_.get(); }
  Heartbeater* heartbeater() { return heartbeat_.get(); }

 private:
  Options opts_;
  int http_port_ = 0;
  int grpc_port_ = 0;
  bool started_ = false;
  std::unique_ptr<Env> power_cut_env_;  // -testing.powerCut; outlives store_
  std::unique_ptr<Store> store_;
  std::unique_ptr<http::HttpClient> client_;
  std::unique_ptr<ThreadPool> fanout_;
  std::unique_ptr<LocationProvider> filer_locations_;
  std::unique_ptr<BlobService> blobs_;
  std::unique_ptr<VolumeMetrics> metrics_;
  std::unique_ptr<VolumeHttpHandler> handler_;
  std::unique_ptr<http::HttpServer> http_;
  std::unique_ptr<VolumeGrpcService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<Heartbeater> heartbeat_;
  std::unique_ptr<VacuumLoop> vacuum_;
};

}  // namespace kelp::volume
