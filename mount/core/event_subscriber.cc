#include "mount/core/event_subscriber.h"

#include <optional>

#include "mount/core/filesystem.h"
#include "shared/log.h"
#include "shared/metrics.h"

namespace kelp::mount {

EventSubscriber::EventSubscriber(FilerClient* meta, Filesystem* fs, KernelNotifier* notifier,
                                 std::string path_prefix, std::string client_name)
    : meta_(meta),
      fs_(fs),
      notifier_(notifier),
      prefix_(std::move(path_prefix)),
      client_name_(std::move(client_name)),
      events_(MetricsRegistry::Default().GetCounter(
          "kelp_mount_events_total",
          "events of other clients' changes the mount applied (its own are not sent to it)")) {}

void EventSubscriber::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void EventSubscriber::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    if (stream_) stream_->Cancel();
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void EventSubscriber::Loop() {
  uint64_t next_seq = 0;  // 0 = from now
  int failures = 0;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    // Without this mount's own changes: their replies said what they did, and the kernel made them.
    auto sub = meta_->Subscribe(next_seq, prefix_, client_name_, /*skip_own=*/true);
    if (sub.ok()) {
      MutexLock lock(mu_);
      if (stopping_) return;
      stream_ = std::move(*sub);
    }
    absl::Status end = sub.status();
    while (sub.ok()) {
      FilerClient::EventStream* stream;
      {
        MutexLock lock(mu_);
        stream = stream_.get();
      }
      auto ev = std::make_optional<filer::Event>();
      if (!stream->Next(&*ev)) {
        end = stream->Finish();
        break;
      }
      failures = 0;
      if (ev->kind() != filer::EVENT_NONE) events_->Inc();  // NONE: a position after own changes
      try {
        if (ev->kind() == filer::EVENT_RESET) {
          fs_->OnReset(notifier_);
        } else {
          fs_->OnEvent(*ev, notifier_);
        }
      } catch (const std::exception& e) {
        spdlog::error("event {}: {}", ev->seq(), e.what());
      }
      if (ev->seq() > 0) {
        next_seq = ev->seq() + 1;
        last_seq_ = ev->seq();
      }
    }
    {
      MutexLock lock(mu_);
      stream_.reset();
      if (stopping_) return;
      if (failures++ == 0) {
        spdlog::warn("filer event stream ended ({}); resuming", end);
      }
      // Whatever happened while we were away may not be replayed exactly: be safe.
      if (next_seq == 0 || failures > 1) {
        lock.Unlock();
        fs_->OnReset(notifier_);
        lock.Lock();
      }
      auto retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(5000, 200 * failures));
      while (!stopping_ && cv_.WaitUntil(lock, retry_at)) {
      }
      if (stopping_) return;
    }
  }
}

}  // namespace kelp::mount
