#include "mount/testing/test_filer.h"

#include <atomic>
#include <cstdlib>

#include "shared/log.h"
#include "shared/strings.h"

namespace kelp::mount {

class TestFiler::Cluster : public filer::ClusterApi {
 public:
  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest&) override {
    return absl::UnavailableError("the test filer has no volume servers");
  }
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const cluster::LookupVolumeRequest&) override {
    return absl::UnavailableError("the test filer has no volume servers");
  }
  Capacity GetCapacity() override { return {uint64_t{1} << 40, uint64_t{1} << 39}; }
  std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) override {
    return std::vector<absl::Status>(fids.size());
  }
};

TestFiler::TestFiler() {
  kv_ = filer::NewMemoryKvStore();
  cluster_ = std::make_unique<Cluster>();
  filer::FilerOptions o;
  o.background_loops = false;
  o.orphan_grace = std::chrono::milliseconds(0);
  core_ = std::make_unique<filer::FilerService>(kv_.get(), cluster_.get(), o);
  if (absl::Status s = core_->Start(); !s.ok()) {
    spdlog::critical("test filer: {}", s);
    std::abort();
  }
  filer::FilerRpcOptions ro;
  ro.subscribe_poll = std::chrono::milliseconds(50);
  rpc_service_ = std::make_unique<filer::FilerRpcService>(core_.get(), ro);
  StartServer();
  address_ = kelp::StrCat("127.0.0.1:", port_);
  filer::FilerClientOptions co;
  co.rpc_timeout = std::chrono::seconds(10);
  co.metrics_label = kelp::StrCat("test-", port_);
  client_ = std::make_unique<filer::FilerClient>(address_, co);
}

std::unique_ptr<filer::FilerClient> TestFiler::NewClient() {
  static std::atomic<int> n{0};
  filer::FilerClientOptions co;
  co.rpc_timeout = std::chrono::seconds(10);
  co.metrics_label = kelp::StrCat("test-", port_, "-", ++n);
  return std::make_unique<filer::FilerClient>(address_, co);
}

TestFiler::~TestFiler() {
  client_.reset();
  rpc_service_->Shutdown();
  if (server_) server_->Stop();
  core_->Stop();
}

void TestFiler::StartServer() {
  rpc::Server::Options o;
  o.loop_threads = 1;
  o.worker_threads = 4;
  o.name = "test-filer";
  o.metric_prefix = "kelp_test_filer_rpc";
  server_ = std::make_unique<rpc::Server>(o, rpc_service_->service());
  if (absl::Status s = server_->Start(); !s.ok()) {
    spdlog::critical("test filer: {}", s);
    std::abort();
  }
  auto p = server_->Listen("127.0.0.1", port_);
  if (!p.ok()) {
    spdlog::critical("test filer: {}", p.status());
    std::abort();
  }
  port_ = *p;
}

void TestFiler::SetDown(bool down) {
  if (down && server_) {
    server_->Stop();
    server_.reset();
  } else if (!down && !server_) {
    StartServer();
  }
}

uint64_t TestFiler::total_calls() const {
  uint64_t n = 0;
  for (uint16_t m = 1; m <= filer::MethodNumber(filer::kLastFilerMethod); ++m) {
    n += client_->calls(static_cast<filer::FilerMethod>(m));
  }
  return n;
}

}  // namespace kelp::mount
