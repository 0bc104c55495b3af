// Keeps the filer informed: every pulse, a unary Cluster.Heartbeat with this server's
// address, capacity, free disk and every volume's state. The reply may lower the volume size
// limit and change the pulse. Survives filer restarts: failures are retried every pulse and
// logged once per outage.
//
// With several filers sharing a store (-filer=a:8888,b:8888) the heartbeats go to the
// coordinator among them: a filer that is not answers with its address (leader), and the
// heartbeater follows; when the filer it talks to fails, it tries the next one in the list.
//
// Threads: Start/Stop from the owner's thread; Trigger from any thread. One background thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/mutex.h"
#include "volume/store/store.h"

namespace kelp::volume {

class Heartbeater {
 public:
  struct Options {
    std::vector<std::string> filers_grpc;  // "host:port" of each filer's gRPC service
    std::string ip;
    uint32_t port = 0;  // HTTP
    uint32_t grpc_port = 0;
    std::string public_url;
    std::string data_center;
    std::string rack;
    int pulse_ms = 1000;  // until the filer says otherwise
  };

  Heartbeater(Options options, Store* store);
  ~Heartbeater();  // Stop()

  void Start();
  void Stop();
  // Sends a heartbeat now (after a volume was created, deleted or changed state).
  void Trigger();

  bool connected() const { return connected_.load(); }
  uint64_t beats() const { return beats_.load(); }  // successful heartbeats so far
  cluster::HeartbeatRequest BuildRequest() const;

 private:
  void Run();

  // The filer to send the next heartbeat to: the leader a filer named, else filers_grpc in turn.
  std::string Target() const;

  const Options opts_;
  Store* const store_;
  std::unique_ptr<cluster::Cluster::Stub> stub_;  // for stub_target_
  std::string stub_target_;
  std::string leader_;  // as the last filer answered; "" = none
  size_t next_filer_ = 0;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool triggered_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) =
      nullptr;  // the call in flight, cancelled by Stop
  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> beats_{0};
};

// A channel to the filer that reconnects quickly after the filer restarts.
std::shared_ptr<grpc::Channel> FilerChannel(const std::string& address);

// The VolumeInfo of v, as heartbeats and the Status RPC report it.
void FillVolumeInfo(const Volume& v, kelp::volume::VolumeInfo* info);

}  // namespace kelp::volume
