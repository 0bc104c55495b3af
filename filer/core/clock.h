// Time source of the filer core, injectable so tests drive leases and retention without
// sleeping. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kelp::filer {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time in ns since the epoch: inode timestamps and event times.
  virtual int64_t WallNs() = 0;
  // Monotonic time in ns: leases, grace periods, GC due times' local pacing.
  virtual int64_t MonoNs() = 0;
};

// The process-wide real clock.
Clock* RealClock();

// A clock that only moves when told to (tests).
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t wall_ns = 1'700'000'000'000'000'000) : wall_(wall_ns) {}
  int64_t WallNs() override { return wall_.load(); }
  int64_t MonoNs() override { return mono_.load(); }
  void Advance(std::chrono::nanoseconds d) {
    wall_ += d.count();
    mono_ += d.count();
  }

 private:
  std::atomic<int64_t> wall_;
  std::atomic<int64_t> mono_{1'000'000'000};
};

}  // namespace kelp::filer
