#include "filer/server/filer_server.h"

#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "filer/http/auth.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/status.h"
#include "shared/metrics.h"
#include "shared/strings.h"
#include "shared/version.h"

namespace kelp::filer {

class FilerServer::HttpHandler : public http::Handler {
 public:
  explicit HttpHandler(FilerServer* server)
      : server_(server), cluster_(server->topology_.get(), server->router_.get()), auth_(security::Current()) {}

  // The filer's own paths first (IsFilerOwnPath), then the file APIs.
  bool RunInline(const http::Request& req) const override {
    if (ClusterHttpRoutes::Owns(req)) return cluster_.RunInline(req);
    if (IsFilerOwnPath(req.path())) return true;
    return server_->http_api_->RunInline(req);
  }

  void Handle(http::Request& req, http::ResponseWriter& w) override {
    if (absl::Status a = auth_.Check(req); !a.ok()) {
      if (!req.body_done()) w.CloseAfter();  // don't read a body we refuse
      return w.SendStatus(a);
    }
    if (ClusterHttpRoutes::Owns(req)) return cluster_.Serve(req, w);
    if (IsFilerOwnPath(req.path())) {
      if (req.path() == "/metrics") {
        if (!http::ServeMetrics(req, w)) w.SendError(405, "use GET");
        return;
      }
      nlohmann::json coordinator = nullptr;
      if (auto h = server_->lease_->holder()) {
        coordinator = {{"id", h->id}, {"grpc", h->grpc_address}, {"http", h->http_address}, {"epoch", h->epoch},
                       {"self", server_->lease_->IsHolder()}};
      }
      nlohmann::json j{{"version", kVersion},
                       {"httpPort", server_->http_port()},
                       {"grpcPort", server_->grpc_port()},
                       {"store", std::string(server_->kv_->kind())},
                       {"coordinator", coordinator},
                       {"gc",
                        {{"pending", server_->core_->gc().pending()},
                         {"deleted", server_->core_->gc().deleted_total()},
                         {"failed", server_->core_->gc().failed_total()}}},
                       {"topology", server_->topology_->StatusJson()}};
      w.SendJson(200, j.dump(2) + "\n");
      return;
    }
    server_->http_api_->Handle(req, w);
  }

 private:
  FilerServer* server_;
  ClusterHttpRoutes cluster_;
  FilerHttpAuth auth_;
};

FilerServer::FilerServer(FilerServerOptions options) : opts_(std::move(options)) {}

FilerServer::~FilerServer() { Stop(); }

absl::Status FilerServer::Start() {
  StoreOptions store = opts_.store;
  if (store.kind == "rocksdb" && store.dir.empty()) store.dir = (std::filesystem::path(opts_.dir) / "meta").string();
  store.rocks.testing_power_cut = opts_.testing_power_cut;
  ASSIGN_OR_RETURN(kv_, OpenKvStore(store));

  admin_ = NewGrpcVolumeAdmin();
  Topology::Options topts;
  topts.volume_size_limit = opts_.volume_size_limit_mb << 20;
  topts.default_replication = opts_.default_replication;
  topts.pulse_ms = opts_.pulse_ms;
  topts.dead_after_ms = std::max<uint32_t>(3 * opts_.pulse_ms, 3000);
  topts.growth_count = opts_.growth_count;
  topology_ = std::make_unique<Topology>(topts, kv_.get(), admin_.get());
  RETURN_IF_ERROR(topology_->Start());

  CoordinatorLease::Options lopts;
  lopts.id = StrCat(opts_.ip, ":", opts_.port, "/", std::random_device{}());
  lopts.lease = std::chrono::milliseconds(std::max<uint32_t>(opts_.coordinator_lease_ms, 300));
  lopts.capacity = [this] {
    auto c = topology_->GetCapacity();
    return std::make_pair(c.total_bytes, c.free_bytes);
  };
  lopts.on_change = [this, pulse = opts_.pulse_ms](bool holder) {
    // Volume servers find a new coordinator within a pulse or two; until they have, do not
    // grow volumes it merely has not heard of yet, and do not tell readers that volumes it
    // has not heard of yet do not exist.
    if (holder) topology_->AwaitVolumesFor(std::chrono::milliseconds(3 * pulse));
    if (holder && kv_->shared()) topology_->HoldGrowthFor(std::chrono::milliseconds(3 * pulse));
    if (holder && core_) core_->gc().Wake();
  };
  lease_ = std::make_unique<CoordinatorLease>(kv_.get(), lopts);
  router_ = std::make_unique<ClusterRouter>(topology_.get(), lease_.get());

  core_ = std::make_unique<FilerService>(kv_.get(), router_.get(), opts_.core);
  RETURN_IF_ERROR(core_->Start());

  cluster_service_ = std::make_unique<ClusterGrpcService>(topology_.get(), router_.get());
  ASSIGN_OR_RETURN(auto grpc_creds, security::ServerCredentials(security::kFilerComponent));
  grpc::ServerBuilder builder;
  int want_grpc = opts_.grpc_port > 0 ? opts_.grpc_port : (opts_.port > 0 ? opts_.port + 10000 : 0);
  builder.AddListeningPort(StrCat(opts_.ip, ":", want_grpc), grpc_creds, &grpc_port_);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(cluster_service_.get());
  grpc_ = builder.BuildAndStart();
  if (!grpc_ || grpc_port_ == 0) {
    return absl::UnavailableError(StrCat("cannot listen for gRPC on ", opts_.ip, ":", want_grpc));
  }

  rpc_service_ = std::make_unique<FilerRpcService>(core_.get());
  rpc::Server::Options ropts;
  ropts.loop_threads = opts_.rpc_threads;
  ropts.worker_threads = std::max(1, opts_.rpc_workers);
  ropts.name = "filer-rpc";
  ropts.metric_prefix = "kelp_filer_rpc";
  ASSIGN_OR_RETURN(ropts.tls, security::ServerSslCtx(security::kFilerComponent));  // null: plaintext
  rpc_ = std::make_unique<rpc::Server>(ropts, rpc_service_->service());
  RETURN_IF_ERROR(rpc_->Start());

  http_api_ = std::make_unique<FilerHttpApi>(core_.get(), router_.get(), opts_.http);
  core_->SetBlobStore(http_api_->blob_store());
  http_handler_ = std::make_unique<HttpHandler>(this);
  http::HttpServer::Options hopts;
  hopts.ip = opts_.ip;
  hopts.port = opts_.port;
  hopts.loop_threads = opts_.http_threads;
  hopts.worker_threads = std::max(1, opts_.http_workers);
  hopts.name = "filer";
  // upgrade_check ran first: the Kelp-Client id parses.
  hopts.upgrades[std::string(rpc::kUpgradeProtocol)] = [this](int fd, std::string initial,
                                                              const http::Request& req) {
    rpc_->Adopt(fd, std::move(initial),
                rpc::ParseClientId(req.header(rpc::kClientHeader)).value_or(0));
  };
  hopts.upgrade_check = [auth = FilerHttpAuth(security::Current())](const http::Request& req) {
    RETURN_IF_ERROR(rpc::ParseClientId(req.header(rpc::kClientHeader)).status());
    return auth.CheckUpgrade(req);
  };
  http_ = std::make_unique<http::HttpServer>(hopts, http_handler_.get());
  RETURN_IF_ERROR(http_->Start());
  lease_->SetAddresses(StrCat(opts_.ip, ":", grpc_port_), StrCat(opts_.ip, ":", http_->port()));
  RETURN_IF_ERROR(lease_->Start());
  started_ = true;
  spdlog::info("filer: HTTP on {}:{}, gRPC on {}:{}, store {}", opts_.ip, http_->port(), opts_.ip, grpc_port_,
               DescribeStore(store));
  auto sec = security::Current();
  if (sec->volume_write.enabled() && !sec->filer_write.enabled()) {
    spdlog::warn("filer: [jwt.signing] is set but [jwt.filer_signing] is not: anyone who reaches the HTTP port can "
                 "get volume write tokens from /dir/assign (docs/security.md)");
  }
  if (sec->volume_write.enabled() && !sec->grpc_tls()) {
    spdlog::warn("filer: [jwt.signing] is set but gRPC is not mutual TLS: anyone who reaches the gRPC port can "
                 "get volume write tokens from Assign (docs/security.md)");
  }
  return absl::OkStatus();
}

void FilerServer::Stop() {
  // First, so another filer sharing the store takes over at once.
  if (lease_) lease_->Stop();
  if (http_) http_->Stop();
  if (rpc_service_) rpc_service_->Shutdown();
  if (rpc_) rpc_->Stop();
  if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (core_) core_->Stop();
  if (topology_) topology_->Stop();
  if (kv_) (void)kv_->Sync();
  if (started_) spdlog::info("filer: stopped");
  started_ = false;
}

}  // namespace kelp::filer
