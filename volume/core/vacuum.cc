#include "volume/core/vacuum.h"

#include <cerrno>

#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::volume {

absl::StatusOr<VacuumResult> VacuumVolumes(Store& store, uint32_t vid, double threshold) {
  std::vector<std::shared_ptr<Volume>> targets;
  if (vid != 0) {
    std::shared_ptr<Volume> v = store.Get(vid);
    if (!v) return PosixError(ENOENT, kelp::StrCat("volume ", vid, " is not on this server"));
    targets.push_back(std::move(v));
  } else {
    targets = store.List();
  }
  VacuumResult result;
  for (const auto& v : targets) {
    double ratio = v->GarbageRatio();
    if (ratio < threshold || v->GetStats().deleted_bytes == 0) continue;
    spdlog::info("volume {}: vacuuming ({:.0f}% garbage)", v->id(), ratio * 100);
    auto r = v->Compact();
    if (!r.ok()) {
      if (vid != 0) return r.status();
      continue;  // Compact logged it
    }
    result.compacted.push_back(v->id());
    if (r->size_before > r->size_after) result.reclaimed_bytes += r->size_before - r->size_after;
  }
  return result;
}

VacuumLoop::VacuumLoop(Store* store, double threshold, int interval_ms)
    : store_(store), threshold_(threshold), interval_ms_(interval_ms) {}

VacuumLoop::~VacuumLoop() { Stop(); }

void VacuumLoop::Start() {
  {
    MutexLock l(mu_);
    running_ = true;
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "vol-vacuum");
    Run();
  });
}

void VacuumLoop::Stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

bool VacuumLoop::RunPassNow() {
  MutexLock l(mu_);
  if (!running_ || stop_) return false;
  // A pass under way may have looked at the volumes before this call: wait for the next one.
  const uint64_t target = started_ + 1;
  kicked_ = true;
  cv_.NotifyAll();
  while (!stop_ && passes_ < target) cv_.Wait(l);
  return passes_ >= target;
}

void VacuumLoop::Run() {
  for (;;) {
    {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms_);
      MutexLock l(mu_);
      while (!stop_ && !kicked_ && cv_.WaitUntil(l, deadline)) {
      }
      if (stop_) return;
      kicked_ = false;
      ++started_;
    }
    // A vacuum that is under way finishes even if Stop() is called meanwhile: Stop waits.
    (void)VacuumVolumes(*store_, 0, threshold_);
    {
      MutexLock l(mu_);
      ++passes_;
    }
    cv_.NotifyAll();
  }
}

}  // namespace kelp::volume
