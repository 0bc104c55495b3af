#include "volume/server/volume_server.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"

#include "shared/grpc_status.h"
#include "shared/http/http_client.h"
#include "shared/http/http_server.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/strings.h"
#include "shared/thread_pool.h"
#include "volume/core/blob_service.h"
#include "volume/core/heartbeat.h"
#include "volume/core/location_provider.h"
#include "volume/core/vacuum.h"
#include "volume/core/volume_metrics.h"
#include "volume/grpc/volume_grpc_service.h"
#include "volume/http/volume_http_handler.h"
#include "volume/store/power_cut_env.h"
#include "volume/store/store.h"

namespace kelp::volume {

VolumeServer::VolumeServer(Options options) : opts_(std::move(options)) {}

VolumeServer::~VolumeServer() { Stop(); }

std::string VolumeServer::url() const { return kelp::StrCat(opts_.ip, ":", http_port_); }
std::string VolumeServer::grpc_address() const { return kelp::StrCat(opts_.ip, ":", grpc_port_); }

absl::Status VolumeServer::Start() {
  if (started_) return absl::FailedPreconditionError("volume server already started");
  if (opts_.garbage_threshold < 0 || opts_.garbage_threshold > 1) {
    return absl::InvalidArgumentError("the garbage threshold is a fraction in [0, 1]");
  }
  if (opts_.file_size_limit_mb == 0 || opts_.file_size_limit_mb > 4000) {
    return absl::InvalidArgumentError("the file size limit must be between 1 and 4000 MiB");
  }
  if (opts_.volume_size_limit_mb == 0 || opts_.volume_size_limit_mb > 32000) {
    return absl::InvalidArgumentError("the volume size limit must be between 1 and 32000 MiB");
  }
  Env* env = opts_.env;
  if (env == nullptr && opts_.testing_power_cut) {
    spdlog::warn("-testing.powerCut: unsynced volume writes live in memory only (testing only)");
    power_cut_env_ = std::make_unique<PowerCutEnv>();
    env = power_cut_env_.get();
  }
  store_ = std::make_unique<Store>(
      Store::Options{opts_.dir, opts_.max_volumes, opts_.volume_size_limit_mb << 20, env});
  RETURN_IF_ERROR(store_->Load());

  // -filer=a:8888,b:8888: several filers sharing one store.
  std::vector<std::string> filers_grpc;
  for (absl::string_view f : absl::StrSplit(opts_.filer, ',', absl::SkipWhitespace())) {
    filers_grpc.push_back(GrpcAddressOf(kelp::ToStd(absl::StripAsciiWhitespace(f)), opts_.filer_grpc_port));
  }
  const std::string filer_list = absl::StrJoin(filers_grpc, ",");
  LocationProvider* locations = opts_.locations;
  if (locations == nullptr && !filers_grpc.empty()) {
    filer_locations_ = std::make_unique<FilerLocationProvider>(filers_grpc);
    locations = filer_locations_.get();
  }
  client_ = std::make_unique<http::HttpClient>();
  fanout_ = std::make_unique<ThreadPool>("vol-repl", 16, 4096);
  blobs_ = std::make_unique<BlobService>(store_.get(), locations, client_.get(), fanout_.get());
  metrics_ = std::make_unique<VolumeMetrics>(store_.get());
  handler_ = std::make_unique<VolumeHttpHandler>(
      VolumeHttpHandler::Options{opts_.file_size_limit_mb << 20, opts_.inline_read_max,
                                 opts_.concurrent_upload_limit_mb << 20, 10000},
      store_.get(), blobs_.get(), metrics_.get());

  http::HttpServer::Options ho;
  ho.ip = opts_.ip;
  ho.port = opts_.port;
  ho.loop_threads = opts_.http_loop_threads;
  ho.worker_threads = opts_.http_worker_threads;
  ho.name = "vol-http";
  http_ = std::make_unique<http::HttpServer>(ho, handler_.get());
  RETURN_IF_ERROR(http_->Start());
  http_port_ = http_->port();
  std::string public_url = opts_.public_url.empty() ? url() : opts_.public_url;
  blobs_->SetSelfUrls({url(), public_url});
  metrics_->AddServerGauges(url());

  int grpc_port = opts_.grpc_port;
  if (grpc_port == 0 && opts_.port != 0) grpc_port = opts_.port + 10000;
  grpc_service_ = std::make_unique<VolumeGrpcService>(store_.get(), blobs_.get(),
                                                      opts_.garbage_threshold, [this] {
                                                        if (heartbeat_) heartbeat_->Trigger();
                                                      });
  ASSIGN_OR_RETURN(auto grpc_creds, security::ServerCredentials(security::kVolumeComponent));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(kelp::StrCat(opts_.ip, ":", grpc_port), grpc_creds, &grpc_port_);
  builder.RegisterService(grpc_service_.get());
  grpc_ = builder.BuildAndStart();
  if (!grpc_ || grpc_port_ == 0) {
    http_->Stop();
    return PosixError(EADDRINUSE,
                      kelp::StrCat("cannot listen for gRPC on ", opts_.ip, ":", grpc_port));
  }

  if (!filers_grpc.empty()) {
    heartbeat_ = std::make_unique<Heartbeater>(
        Heartbeater::Options{filers_grpc, opts_.ip, static_cast<uint32_t>(http_port_),
                             static_cast<uint32_t>(grpc_port_), public_url, opts_.data_center,
                             opts_.rack, opts_.pulse_ms},
        store_.get());
    heartbeat_->Start();
  }
  if (opts_.vacuum_interval_sec > 0) {
    vacuum_ = std::make_unique<VacuumLoop>(store_.get(), opts_.garbage_threshold,
                                           opts_.vacuum_interval_sec * 1000);
    vacuum_->Start();
  }
  started_ = true;
  spdlog::info("volume server: http {} grpc {} dir {} ({} volumes){}", url(), grpc_address(),
               opts_.dir, store_->List().size(),
               filers_grpc.empty() ? ", standalone" : kelp::StrCat(", filer ", filer_list));
  return absl::OkStatus();
}

void VolumeServer::Stop() {
  if (heartbeat_) heartbeat_->Stop();
  if (http_) http_->Stop();
  if (grpc_) {
    grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc_.reset();
  }
  if (vacuum_) vacuum_->Stop();
  if (fanout_) fanout_->Stop();
  // A graceful stop (SIGTERM, systemctl stop) leaves every write on the disk, not only in the
  // page cache.
  if (started_ && store_) {
    for (const std::shared_ptr<Volume>& v : store_->List()) {
      if (absl::Status s = v->Sync(); !s.ok())
        spdlog::warn("volume {}: sync at stop: {}", v->id(), s);
    }
  }
  started_ = false;
}

}  // namespace kelp::volume
