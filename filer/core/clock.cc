#include "filer/core/clock.h"

namespace kelp::filer {
namespace {

class Real : public Clock {
 public:
  int64_t WallNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonoNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

Clock* RealClock() {
  static Real clock;
  return &clock;
}

}  // namespace kelp::filer
