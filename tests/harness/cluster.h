// The integration tests' one cluster fixture: `kelp filer` and `kelp volume` processes on
// loopback, each on free ports with its directory and log in one temp dir, stopped (volume
// servers first) when the cluster goes, whatever the test did.
//
//   TestCluster::Options o;
//   o.volumes = 3;
//   o.volume_flags = {"-max=30"};
//   TestCluster c(o);
//   c.Status();                  // the first filer's GET /status
//   c.KillVolume(1); c.StartVolume(1);
//
// Filers keep an embedded RocksDB each, or share one PostgreSQL keyspace (Options::pg_dsn);
// volume servers heartbeat to every filer of the cluster (-filer=a,b), or to none when the
// cluster has no filer. The constructor returns once every filer answers and a coordinator
// sees every volume server alive. Not thread-safe: use from the test's main thread (a
// test's own threads may call the const address getters and http()).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/http/http_client.h"
#include "shared/testing/temp_dir.h"
#include "tests/harness/harness.h"

namespace kelp::testing {

class TestCluster {
 public:
  struct Options {
    int filers = 1;
    int volumes = 1;
    // Added to every start of each `kelp filer` / `kelp volume` (after the fixture's own:
    // -dir, -port, and for volume servers -port.grpc and -filer).
    std::vector<std::string> filer_flags;
    std::vector<std::string> volume_flags;
    // Non-empty: the filers share this PostgreSQL (-store=postgres) under pg_keyspace, with a
    // 2 s coordinator lease so a test sees a takeover soon. Empty: a RocksDB each.
    std::string pg_dsn;
    std::string pg_keyspace = "kelp";
    // The temp dir's name prefix (it says which test left a directory behind).
    std::string name = "kelp-cluster";
  };

  explicit TestCluster(Options options);
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  // Addresses: "127.0.0.1:port" of the HTTP port; gRPC listens on port + 10000.
  std::string filer(int i = 0) const;
  int filer_port(int i = 0) const { return filers_[i].port; }
  std::string filer_grpc(int i = 0) const;
  std::string filer_dir(int i = 0) const;
  // Every filer, comma-separated (what -filer= takes).
  std::string filer_list() const;
  std::string volume(int i = 0) const;
  int volume_port(int i = 0) const { return volumes_[i].port; }
  std::string volume_grpc(int i = 0) const;
  std::string volume_dir(int i = 0) const;

  // Start (and wait until it answers on HTTP), stop (SIGTERM; returns the exit status) or
  // kill -9 (and reap) one process. Starting again reuses its ports and directory.
  void StartFiler(int i);
  int StopFiler(int i);
  void KillFiler(int i);
  bool FilerRunning(int i);
  Process& filer_process(int i) { return *filers_[i].proc; }
  void StartVolume(int i);
  int StopVolume(int i);
  void KillVolume(int i);
  Process& volume_process(int i) { return *volumes_[i].proc; }

  // GET /status of filer i as JSON (an empty object when it does not answer).
  nlohmann::json Status(int i = 0);
  // Volume servers filer i lists alive.
  int AliveVolumes(int i = 0);
  // The filer that says it is the coordinator, or -1.
  int Coordinator();
  // Until a coordinator lists n volume servers alive (true), or the timeout passes.
  bool WaitAliveVolumes(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30));

  const TempDir& tmp() const { return tmp_; }
  http::HttpClient& http() { return http_; }
  // Every process's log, for a failure message.
  std::string Logs() const;

 private:
  struct Proc {
    int port = 0;
    std::unique_ptr<Process> proc;
  };
  std::string LogPath(const char* role, int i) const;

  const Options opts_;
  TempDir tmp_;
  std::vector<Proc> filers_;
  std::vector<Proc> volumes_;
  http::HttpClient http_{http::HttpClient::Options{.connect_timeout_ms = 1000, .io_timeout_ms = 10000}};
};

}  // namespace kelp::testing
