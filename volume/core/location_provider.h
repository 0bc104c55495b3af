// Where the copies of a volume live, for replication. The production implementation asks
// the filer (Cluster.LookupVolume over gRPC) and caches the answer; tests inject their own.
//
// Threads: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "proto/cluster.grpc.pb.h"
#include "shared/mutex.h"

namespace kelp::volume {

class LocationProvider {
 public:
  virtual ~LocationProvider() = default;
  // HTTP addresses ("ip:port") of every live server holding volume vid, this one included.
  virtual absl::StatusOr<std::vector<std::string>> Lookup(uint32_t vid) = 0;
  // Forgets a cached answer (after a replica failed), so the next Lookup asks again.
  virtual void Invalidate(uint32_t vid) = 0;
};

class FilerLocationProvider : public LocationProvider {
 public:
  // filers_grpc: "host:port" of each filer's gRPC service (several filers sharing a store:
  // any answers; when one fails the next is asked). ttl: how long an answer is reused.
  FilerLocationProvider(std::vector<std::string> filers_grpc,
                        std::chrono::milliseconds ttl = std::chrono::seconds(10));

  absl::StatusOr<std::vector<std::string>> Lookup(uint32_t vid) override;
  void Invalidate(uint32_t vid) override;

 private:
  struct Entry {
    std::vector<std::string> urls;
    std::chrono::steady_clock::time_point expires;
  };
  const std::vector<std::string> filers_grpc_;
  const std::chrono::milliseconds ttl_;
  std::vector<std::unique_ptr<cluster::Cluster::Stub>> stubs_;
  Mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;  // the filer that answered last
  std::map<uint32_t, Entry> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::volume
