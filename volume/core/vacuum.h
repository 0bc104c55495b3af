// Vacuum policy: which volumes to compact, on demand (the Vacuum RPC) and in the background.
//
// Threads: VacuumVolumes is thread-safe (a volume refuses a second concurrent vacuum).
// VacuumLoop: Start/Stop from the owner's thread, RunPassNow from any thread; one background
// thread.
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

  // Has the loop make a pass now rather than at the end of its interval, and waits until a
  // pass that started after this call has finished (the volumes' state then reflects its
  // decisions). False if the loop stopped first, or is not started. For tests.
  bool RunPassNow();

 private:
  void Run();
  Store* const store_;
  const double threshold_;
  const int interval_ms_;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;  // stop_, kicked_, passes_
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // Start() was called
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;  // RunPassNow asked for a pass
  uint64_t started_ ABSL_GUARDED_BY(mu_) = 0;  // passes begun
  uint64_t passes_ ABSL_GUARDED_BY(mu_) = 0;   // passes finished
};

}  // namespace kelp::volume
