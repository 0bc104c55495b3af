// Vacuum policy: which volumes to compact, on demand (the Vacuum RPC) and in the background.
//
// Threads: VacuumVolumes is thread-safe (a volume refuses a second concurrent vacuum).
// VacuumLoop: Start/Stop from the owner's thread; one background thread.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shared/mutex.h"
#include "volume/store/store.h"

namespace kelp::volume {

struct VacuumResult {
  std::vector<uint32_t> compacted;  // volume ids
  uint64_t reclaimed_bytes = 0;
};

// Compacts volume vid (0 = every volume) if its garbage ratio is at or over threshold
// (a fraction in [0, 1]). NotFound if vid names no volume here. A volume that fails to
// compact is logged and skipped when vid is 0; its error is returned otherwise.
absl::StatusOr<VacuumResult> VacuumVolumes(Store& store, uint32_t vid, double threshold);

class VacuumLoop {
 public:
  // Checks every interval_ms; threshold as for VacuumVolumes.
  VacuumLoop(Store* store, double threshold, int interval_ms);
  ~VacuumLoop();  // Stop()
  void Start();
  void Stop();

 private:
  void Run();
  Store* const store_;
  const double threshold_;
  const int interval_ms_;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kelp::volume
