// coordinator_sim: the filer's coordinator (filer/cluster/topology.h) driven by a simulated
// cluster in one process: N volume servers (heartbeat clients, each with its volumes, racks and
// data centers) heartbeating every pulse, and clients asking for file ids at a fixed rate.
// Every assign "writes" a blob into the volume it got, so volumes fill, turn read-only at the
// size limit and the coordinator grows new ones while under load.
//
//   coordinator_sim -servers=1000 -assignRate=10000 -seconds=20 [-transport=grpc|inproc]
//                   [-assignTransport=inproc|grpc]
//
// transport=grpc (default): heartbeats go over real gRPC to the coordinator's Cluster service
// on 127.0.0.1, as volume servers send them (volume allocations, which the coordinator sends
// to volume servers, are answered in process). inproc: direct calls, the coordinator's own
// cost only. assignTransport: inproc (default) as the coordinator filer serves the assigns of
// its own clients (its metadata RPC handlers call the topology in process); grpc as another
// filer forwards its clients' assigns to the coordinator.
//
// Reports assign latency, heartbeat processing cost (inside the coordinator, and round trip),
// and placement balance (volumes per server and per rack, replicas placed as asked).
// Not a CI test; figures go to bench/RESULTS.md and docs/scale.md.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "filer/cluster/topology.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/file_id.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/strings.h"

using namespace kelp;
using namespace kelp::filer;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int servers = 1000;
  int max_volumes = 8;
  int racks = 50;
  int data_centers = 2;
  int assign_rate = 10000;
  int clients = 8;
  int heartbeat_threads = 4;
  int seconds = 20;
  int pulse_ms = 1000;
  uint64_t volume_limit_mb = 1024;
  uint64_t blob_kb = 64;
  std::string replication = "010";
  std::string transport = "grpc";
  std::string assign_transport = "inproc";
  int initial_volumes = 2000;
};

// Latencies in µs, kept whole (a run is ~200k samples).
class Samples {
 public:
  void Add(double us) {
    std::lock_guard lock(mu_);
    v_.push_back(us);
  }
  std::string Summary() {
    std::lock_guard lock(mu_);
    if (v_.empty()) return "no samples";
    std::sort(v_.begin(), v_.end());
    auto q = [&](double p) { return v_[std::min(v_.size() - 1, static_cast<size_t>(p * v_.size()))]; };
    double sum = 0;
    for (double x : v_) sum += x;
    return StrCat("n=", v_.size(), " mean=", Fmt(sum / v_.size()), " p50=", Fmt(q(0.5)), " p90=", Fmt(q(0.9)),
                  " p99=", Fmt(q(0.99)), " p99.9=", Fmt(q(0.999)), " max=", Fmt(v_.back()), " (us)");
  }
  void Clear() {
    std::lock_guard lock(mu_);
    v_.clear();
  }
  double Sum() {
    std::lock_guard lock(mu_);
    double s = 0;
    for (double x : v_) s += x;
    return s;
  }

 private:
  static std::string Fmt(double x) { return fmt::format("{:.0f}", x); }
  std::mutex mu_;
  std::vector<double> v_;
};

// The simulated volume servers: what they hold, and how full.
class FakeCluster : public VolumeAdmin {
 public:
  struct Server {
    std::string url, grpc, rack, dc;
    int port = 0;
    std::map<uint32_t, uint64_t> volumes;  // vid -> bytes
    std::map<uint32_t, std::string> replication;
  };

  explicit FakeCluster(const Options& o) {
    for (int i = 0; i < o.servers; ++i) {
      Server s;
      s.port = 20000 + i;
      s.url = StrCat("10.0.", i / 250, ".", i % 250, ":8080");
      s.grpc = StrCat("10.0.", i / 250, ".", i % 250, ":18080");
      s.dc = StrCat("dc", i % o.data_centers);
      s.rack = StrCat(s.dc, "-rack", (i / o.data_centers) % std::max(1, o.racks / o.data_centers));
      by_grpc_[s.grpc] = i;
      by_url_[s.url] = i;
      servers_.push_back(std::move(s));
    }
  }

  absl::Status AllocateVolume(const std::string& addr, uint32_t vid, const std::string&,
                              const std::string& replication) override {
    std::lock_guard lock(mu_);
    auto it = by_grpc_.find(addr);
    if (it == by_grpc_.end()) return absl::NotFoundError(addr);
    servers_[it->second].volumes[vid] = 0;
    servers_[it->second].replication[vid] = replication;
    ++allocations_;
    return absl::OkStatus();
  }
  absl::StatusOr<volume::BatchDeleteResponse> BatchDelete(const std::string&, const std::vector<std::string>&) override {
    return volume::BatchDeleteResponse();
  }

  void Write(const std::string& url, uint32_t vid, uint64_t bytes) {
    std::lock_guard lock(mu_);
    auto it = by_url_.find(url);
    if (it != by_url_.end()) servers_[it->second].volumes[vid] += bytes;
  }

  cluster::HeartbeatRequest Heartbeat(int i, const Options& o) {
    std::lock_guard lock(mu_);
    const Server& s = servers_[i];
    cluster::HeartbeatRequest h;
    h.set_ip(s.url.substr(0, s.url.find(':')));
    h.set_port(8080);
    h.set_grpc_port(18080);
    h.set_rack(s.rack);
    h.set_data_center(s.dc);
    h.set_max_volumes(o.max_volumes);
    h.set_disk_total(4ULL << 40);
    h.set_disk_free((4ULL << 40) - s.volumes.size() * (o.volume_limit_mb << 20));
    for (const auto& [vid, bytes] : s.volumes) {
      auto* v = h.add_volumes();
      v->set_id(vid);
      v->set_size(bytes);
      v->set_replication(s.replication.at(vid));
      v->set_file_count(bytes / (o.blob_kb << 10));
      v->set_max_key(0);
    }
    return h;
  }

  std::vector<Server> Snapshot() {
    std::lock_guard lock(mu_);
    return servers_;
  }
  uint64_t allocations() {
    std::lock_guard lock(mu_);
    return allocations_;
  }

 private:
  std::mutex mu_;
  std::vector<Server> servers_;
  std::map<std::string, int> by_grpc_, by_url_;
  uint64_t allocations_ = 0;
};

// The coordinator's Cluster service, timing the work inside it.
class TimedService final : public cluster::Cluster::Service {
 public:
  TimedService(Topology* t, Samples* hb, Samples* as) : t_(t), hb_(hb), as_(as) {}
  grpc::Status Heartbeat(grpc::ServerContext*, const cluster::HeartbeatRequest* req,
                         cluster::HeartbeatResponse* resp) override {
    auto t0 = Clock::now();
    *resp = t_->Heartbeat(*req);
    hb_->Add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    return grpc::Status::OK;
  }
  grpc::Status Assign(grpc::ServerContext*, const cluster::AssignRequest* req, cluster::AssignResponse* resp) override {
    auto t0 = Clock::now();
    auto r = t_->Assign(*req);
    as_->Add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!r.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(r.status().message()));
    *resp = std::move(*r);
    return grpc::Status::OK;
  }

 private:
  Topology* t_;
  Samples* hb_;
  Samples* as_;
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  FlagSet flags("coordinator_sim", "coordinator_sim [flags]",
                "Drives the filer's coordinator with simulated volume servers and assign clients.");
  flags.Add("servers", &o.servers, "simulated volume servers");
  flags.Add("maxVolumes", &o.max_volumes, "volumes each server can hold");
  flags.Add("racks", &o.racks, "racks in all (spread over the data centers)");
  flags.Add("dataCenters", &o.data_centers, "data centers");
  flags.Add("assignRate", &o.assign_rate, "assigns per second, in all");
  flags.Add("clients", &o.clients, "assign client threads");
  flags.Add("heartbeatThreads", &o.heartbeat_threads, "threads sending the servers' heartbeats");
  flags.Add("seconds", &o.seconds, "length of the measured run, in s");
  flags.Add("pulseMs", &o.pulse_ms, "heartbeat period, in ms");
  flags.Add("volumeLimitMB", &o.volume_limit_mb, "a volume this full (MiB) turns read-only");
  flags.Add("blobKB", &o.blob_kb, "bytes each assign writes into its volume, in KiB");
  flags.Add("replication", &o.replication, "replication asked for (xyz)");
  flags.Add("transport", &o.transport, "heartbeats: grpc or inproc");
  flags.Add("assignTransport", &o.assign_transport, "assigns: inproc or grpc");
  flags.Add("initialVolumes", &o.initial_volumes, "volumes the coordinator places before the run");
  flags.ParseOrExit(argc - 1, argv + 1);
  InitLogging("error");  // the coordinator's per-volume info lines and warnings are not the point

  auto kv = NewMemoryKvStore();
  FakeCluster sim(o);
  Topology::Options to;
  to.volume_size_limit = o.volume_limit_mb << 20;
  to.pulse_ms = o.pulse_ms;
  to.dead_after_ms = 5 * o.pulse_ms;
  to.default_replication = o.replication;
  Topology topo(to, kv.get(), &sim);
  if (auto s = topo.Start(); !s.ok()) {
    std::fprintf(stderr, "start: %s\n", s.ToString().c_str());
    return 1;
  }

  Samples hb_inside, as_inside, hb_rtt, as_rtt;
  TimedService service(&topo, &hb_inside, &as_inside);
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  int port = 0;
  if (o.transport == "grpc" || o.assign_transport == "grpc") {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
    if (!server) {
      std::fprintf(stderr, "cannot start the gRPC server\n");
      return 1;
    }
    channel = grpc::CreateChannel(StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  }
  auto heartbeat = [&](int i) {
    cluster::HeartbeatRequest req = sim.Heartbeat(i, o);
    auto t0 = Clock::now();
    if (channel && o.transport == "grpc") {
      thread_local auto stub = cluster::Cluster::NewStub(channel);
      grpc::ClientContext ctx;
      cluster::HeartbeatResponse resp;
      (void)stub->Heartbeat(&ctx, req, &resp);
    } else {
      topo.Heartbeat(req);
      hb_inside.Add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    hb_rtt.Add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  };

  // Every server reports once before the run (as a cluster that is up already), and the
  // coordinator places the initial volumes, in steps with heartbeats between (so that no
  // server is taken for dead meanwhile).
  for (int i = 0; i < o.servers; ++i) heartbeat(i);
  double grow_s = 0;
  for (int placed = 0; placed < o.initial_volumes;) {
    int step = std::min(100, o.initial_volumes - placed);
    auto g0 = Clock::now();
    if (auto s = topo.GrowVolumes("", o.replication, step); !s.ok()) {
      std::fprintf(stderr, "initial growth: %s\n", s.ToString().c_str());
      break;
    }
    grow_s += std::chrono::duration<double>(Clock::now() - g0).count();
    placed += step;
    for (int i = 0; i < o.servers; ++i) heartbeat(i);
  }
  for (int i = 0; i < o.servers; ++i) heartbeat(i);
  // The run's figures only.
  for (Samples* s : {&hb_inside, &as_inside, &hb_rtt, &as_rtt}) s->Clear();
  const uint64_t allocations0 = sim.allocations();
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(o.seconds);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  std::atomic<uint64_t> heartbeats{0}, assigns{0}, assign_errors{0};
  for (int h = 0; h < o.heartbeat_threads; ++h) {
    threads.emplace_back([&, h] {
      // Server i beats at start + pulse * (k + i / servers): evenly spread over the pulse.
      for (uint64_t k = 0; !stop; ++k) {
        for (int i = h; i < o.servers && !stop; i += o.heartbeat_threads) {
          auto due = start + std::chrono::microseconds(static_cast<int64_t>(
                                 (k + static_cast<double>(i) / o.servers) * o.pulse_ms * 1000));
          std::this_thread::sleep_until(due);
          if (Clock::now() >= end) break;
          heartbeat(i);
          ++heartbeats;
        }
        if (Clock::now() >= end) break;
      }
    });
  }
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = channel && o.assign_transport == "grpc" ? cluster::Cluster::NewStub(channel) : nullptr;
      const double per_client = static_cast<double>(o.assign_rate) / o.clients;
      for (uint64_t n = 0;; ++n) {
        auto due = start + std::chrono::microseconds(static_cast<int64_t>((n + c / double(o.clients)) * 1e6 / per_client));
        if (due >= end) break;
        std::this_thread::sleep_until(due);
        cluster::AssignRequest req;
        req.set_count(1);
        auto t0 = Clock::now();
        absl::StatusOr<cluster::AssignResponse> r;
        if (stub) {
          grpc::ClientContext ctx;
          cluster::AssignResponse resp;
          grpc::Status s = stub->Assign(&ctx, req, &resp);
          r = s.ok() ? absl::StatusOr<cluster::AssignResponse>(resp) : absl::UnavailableError(s.error_message());
        } else {
          r = topo.Assign(req);
          as_inside.Add(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        }
        // Latency from when the request was due, so a coordinator that falls behind shows.
        as_rtt.Add(std::chrono::duration<double, std::micro>(Clock::now() - due).count());
        if (!r.ok()) {
          ++assign_errors;
          continue;
        }
        ++assigns;
        auto fid = FileId::Parse(r->fid());
        if (!fid.ok()) continue;
        for (const auto& loc : r->locations()) sim.Write(loc.url(), fid->volume_id, o.blob_kb << 10);
      }
    });
  }
  std::this_thread::sleep_until(end);
  stop = true;
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = CpuSeconds() - cpu0;
  if (server) server->Shutdown();

  // Placement.
  auto servers = sim.Snapshot();
  std::vector<double> per_server;
  std::map<std::string, int> per_rack;
  std::map<uint32_t, std::vector<const FakeCluster::Server*>> replicas;
  uint64_t full = 0, volumes = 0;
  for (const auto& s : servers) {
    per_server.push_back(static_cast<double>(s.volumes.size()));
    per_rack[s.rack] += static_cast<int>(s.volumes.size());
    for (const auto& [vid, bytes] : s.volumes) {
      replicas[vid].push_back(&s);
      if (bytes >= (o.volume_limit_mb << 20)) ++full;
      ++volumes;
    }
  }
  auto stats = [](const std::vector<double>& v) {
    double mean = 0, sq = 0;
    for (double x : v) mean += x;
    mean /= std::max<size_t>(v.size(), 1);
    for (double x : v) sq += (x - mean) * (x - mean);
    double sd = std::sqrt(sq / std::max<size_t>(v.size(), 1));
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return fmt::format("min {:.0f} mean {:.2f} max {:.0f} stddev {:.2f}", *lo, mean, *hi, sd);
  };
  std::vector<double> rack_v;
  for (const auto& [r, n] : per_rack) rack_v.push_back(n);
  auto rep = Replication::Parse(o.replication);
  uint64_t misplaced = 0;
  for (const auto& [vid, rs] : replicas) {
    std::set<std::string> dcs, racks, urls;
    for (const auto* s : rs) {
      dcs.insert(s->dc);
      racks.insert(s->dc + "/" + s->rack);
      urls.insert(s->url);
    }
    bool ok = static_cast<int>(rs.size()) == rep->copies() && static_cast<int>(urls.size()) == rep->copies() &&
              static_cast<int>(dcs.size()) == rep->diff_dc + 1 &&
              static_cast<int>(racks.size()) == rep->diff_dc + rep->diff_rack + 1;
    misplaced += !ok;
  }

  std::printf(
      "coordinator_sim: %d servers (%d racks, %d DCs, %d volumes max each), replication %s, heartbeats %s, "
      "assigns %s\n",
      o.servers, o.racks, o.data_centers, o.max_volumes, o.replication.c_str(), o.transport.c_str(),
      o.assign_transport.c_str());
  std::printf("initial placement of %d volumes: %.2f s (%.2f ms each)\n", o.initial_volumes, grow_s,
              grow_s * 1e3 / std::max(1, o.initial_volumes));
  std::printf("run: %.1f s wall, %.1f CPU s in this process (%.2f cores; clients included)\n", wall, cpu, cpu / wall);
  std::printf("assigns: %llu ok (%.0f/s, asked %d/s), %llu errors\n", static_cast<unsigned long long>(assigns.load()),
              assigns / wall, o.assign_rate, static_cast<unsigned long long>(assign_errors.load()));
  std::printf("  latency from due time: %s\n", as_rtt.Summary().c_str());
  std::printf("  inside the coordinator: %s\n", as_inside.Summary().c_str());
  std::printf("heartbeats: %llu (%.0f/s, each with up to %d volumes)\n", static_cast<unsigned long long>(heartbeats.load()),
              heartbeats / wall, o.max_volumes);
  std::printf("  inside the coordinator: %s\n", hb_inside.Summary().c_str());
  std::printf("  round trip: %s\n", hb_rtt.Summary().c_str());
  std::printf("  coordinator time in heartbeats: %.3f cores; in assigns: %.3f cores\n", hb_inside.Sum() / 1e6 / wall,
              as_inside.Sum() / 1e6 / wall);
  std::printf("placement: %llu volumes (%llu replicas placed during the run, %llu replicas full), %llu misplaced replica sets\n",
              static_cast<unsigned long long>(replicas.size()),
              static_cast<unsigned long long>(sim.allocations() - allocations0),
              static_cast<unsigned long long>(full), static_cast<unsigned long long>(misplaced));
  std::printf("  volumes per server: %s\n", stats(per_server).c_str());
  std::printf("  volumes per rack: %s (%zu racks)\n", stats(rack_v).c_str(), rack_v.size());
  (void)volumes;
  topo.Stop();
  return misplaced == 0 && assign_errors == 0 ? 0 : 1;
}
