// filer_bench: metadata scale check of the filer core and its RPC API on RocksDB.
//
//   filer_bench -dir=/tmp/kelp-bench -entries=1000000 -threads=4 -rpcClients=16 -rpcEntries=100000
//
// Phases (each reports a rate):
//   1. create `entries` files in one directory through FilerService (threads in parallel);
//   2. look up `lookups` random names among them;
//   3. list the directory with ReadDir (core), tracking the process's resident memory, then
//      list it again through the metadata RPC transport (in-process server on 127.0.0.1:0 + FilerClient);
//   4. creates and lookups through the metadata RPC transport from `rpcClients` concurrent clients into a second
//      directory (`rpcEntries` files in all).
// Not a CI test: run by hand, figures go to bench/RESULTS.md.
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>


#include "filer/client/filer_client.h"
#include "filer/core/filer_service.h"
#include "filer/rpc/filer_rpc_service.h"
#include "filer/store/kv_store.h"
#include "shared/flags.h"
#include "shared/log.h"

using namespace kelp::filer;
using Steady = std::chrono::steady_clock;

namespace {

class NullCluster : public ClusterApi {
 public:
  absl::StatusOr<kelp::cluster::AssignResponse> Assign(const kelp::cluster::AssignRequest&) override {
    return absl::UnimplementedError("bench");
  }
  absl::StatusOr<kelp::cluster::LookupVolumeResponse> LookupVolume(
      const kelp::cluster::LookupVolumeRequest&) override {
    return absl::UnimplementedError("bench");
  }
  Capacity GetCapacity() override { return {}; }
  std::vector<absl::Status> DeleteBlobs(const std::vector<std::string>& fids) override {
    return std::vector<absl::Status>(fids.size());
  }
};

// Resident set size of this process in KiB (VmRSS).
long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

double Seconds(Steady::time_point since) {
  return std::chrono::duration<double>(Steady::now() - since).count();
}

std::string Name(uint64_t i) { return "file-" + std::to_string(i); }

// Runs fn(thread, i) for i in [0, n) split over `threads` threads; returns seconds.
template <typename Fn>
double Parallel(int threads, uint64_t n, Fn fn) {
  auto start = Steady::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (uint64_t i = t; i < n; i += threads) fn(t, i);
    });
  }
  for (auto& t : ts) t.join();
  return Seconds(start);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/kelp-filer-bench";
  uint64_t entries = 1'000'000;
  uint64_t lookups = 200'000;
  int threads = 2;
  int rpc_clients = 16;
  uint64_t rpc_entries = 100'000;
  kelp::FlagSet flags("filer_bench", "filer_bench [flags]", "Filer metadata scale check.");
  flags.Add("dir", &dir, "RocksDB directory (wiped first)");
  flags.Add("entries", &entries, "files created in one directory through the core");
  flags.Add("lookups", &lookups, "random lookups among them");
  flags.Add("threads", &threads, "core threads creating and looking up");
  flags.Add("rpcClients", &rpc_clients, "concurrent RPC clients in phase 4");
  flags.Add("rpcEntries", &rpc_entries, "files created through the metadata RPC transport in phase 4");
  flags.ParseOrExit(argc - 1, argv + 1);
  kelp::InitLogging("warn");

  std::filesystem::remove_all(dir);
  auto kv = OpenRocksKvStore(dir);
  if (!kv.ok()) {
    std::fprintf(stderr, "%s\n", kv.status().ToString().c_str());
    return 1;
  }
  NullCluster cluster;
  FilerOptions opts;
  FilerService fs(kv->get(), &cluster, opts);
  if (auto s = fs.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  CreateArgs mk;
  mk.parent = 1;
  mk.name = "big";
  mk.mode = S_IFDIR | 0755;
  uint64_t big = fs.Create(mk)->ino();

  std::atomic<uint64_t> errors{0};
  double t = Parallel(threads, entries, [&](int, uint64_t i) {
    CreateArgs a;
    a.parent = big;
    a.name = Name(i);
    a.mode = S_IFREG | 0644;
    a.exclusive = true;
    if (!fs.Create(a).ok()) ++errors;
  });
  std::printf("core create: %lu files in one directory, %d threads: %.1f s, %.0f creates/s (%lu errors)\n",
              entries, threads, t, entries / t, errors.load());

  t = Parallel(threads, lookups, [&](int th, uint64_t i) {
    thread_local std::mt19937_64 rng(th * 7919 + 1);
    if (!fs.Lookup(big, Name(rng() % entries)).ok()) ++errors;
    (void)i;
  });
  std::printf("core lookup: %lu random lookups, %d threads: %.2f s, %.0f lookups/s (%lu errors)\n",
              lookups, threads, t, lookups / t, errors.load());

  // Twice: the first pass also warms RocksDB's block cache (bounded by its option), the
  // second shows what listing itself holds.
  long rss0 = 0, peak = 0;
  uint64_t listed = 0;
  absl::Status s;
  for (int pass = 1; pass <= 2; ++pass) {
    rss0 = RssKiB();
    peak = rss0;
    listed = 0;
    auto start = Steady::now();
    s = fs.ReadDir(big, 0, 0, false, [&](DirEntry&&) {
      if (++listed % 10000 == 0) peak = std::max(peak, RssKiB());
      return true;
    });
    t = Seconds(start);
    std::printf("core readdir pass %d: %lu entries in %.2f s (%.0f entries/s), RSS %ld -> peak %ld KiB (+%ld KiB) %s\n",
                pass, listed, t, listed / t, rss0, peak, peak - rss0, s.ok() ? "" : s.ToString().c_str());
  }

  FilerRpcService svc(&fs);
  kelp::rpc::Server server(kelp::rpc::Server::Options{}, svc.service());
  if (!server.Start().ok()) return 1;
  int port = *server.Listen("127.0.0.1", 0);
  auto client = std::make_unique<FilerClient>("127.0.0.1:" + std::to_string(port));
  rss0 = RssKiB();
  peak = rss0;
  listed = 0;
  auto start = Steady::now();
  s = client->ReadDir(big, 0, 0, true, [&](DirEntry&&) {
    if (++listed % 10000 == 0) peak = std::max(peak, RssKiB());
    return true;
  });
  t = Seconds(start);
  std::printf("rpc readdir+attrs: %lu entries in %.2f s (%.0f entries/s), RSS (server+client) %ld -> peak %ld KiB (+%ld KiB) %s\n",
              listed, t, listed / t, rss0, peak, peak - rss0, s.ok() ? "" : s.ToString().c_str());

  mk.name = "rpc";
  uint64_t gdir = fs.Create(mk)->ino();
  std::vector<std::unique_ptr<FilerClient>> clients;
  for (int i = 0; i < rpc_clients; ++i) {
    clients.push_back(std::make_unique<FilerClient>("127.0.0.1:" + std::to_string(port)));
  }
  errors = 0;
  t = Parallel(rpc_clients, rpc_entries, [&](int c, uint64_t i) {
    CreateRequest r;
    r.set_parent(gdir);
    r.set_name(Name(i));
    r.set_mode(S_IFREG | 0644);
    r.set_exclusive(true);
    if (!clients[c]->Create(r).ok()) ++errors;
  });
  std::printf("rpc create: %lu files in one directory, %d clients: %.1f s, %.0f creates/s (%lu errors)\n",
              rpc_entries, rpc_clients, t, rpc_entries / t, errors.load());
  t = Parallel(rpc_clients, rpc_entries, [&](int c, uint64_t i) {
    if (!clients[c]->Lookup(gdir, Name(i)).ok()) ++errors;
  });
  std::printf("rpc lookup: %lu lookups, %d clients: %.1f s, %.0f lookups/s (%lu errors)\n",
              rpc_entries, rpc_clients, t, rpc_entries / t, errors.load());

  svc.Shutdown();
  server.Stop();
  fs.Stop();
  std::printf("store size: %.1f MiB\n", (*kv)->ApproximateSize() / 1048576.0);
  return 0;
}
