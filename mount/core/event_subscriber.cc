#include "mount/core/event_subscriber.h"

#include <optional>

#include "mount/core/filesystem.h"
#include "shared/log.h"

namespace kelp::mount {

EventSubscriber::EventSubscriber(FilerClient* meta, Filesystem* fs, KernelNotifier* notifier, std::string path_prefix,
                                 std::string client_name)
    : meta_(meta),
      fs_(fs),
      notifier_(notifier),
      prefix_(std::move(path_prefix)),
      client_name_(std::move(client_name)) {}

void EventSubscriber::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void EventSubscriber::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (stream_) stream_->Cancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventSubscriber::Loop() {
  uint64_t next_seq = 0;  // 0 = from now
  int failures = 0;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    auto sub = meta_->Subscribe(next_seq, prefix_, client_name_);
    if (sub.ok()) {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stream_ = std::move(*sub);
    }
    absl::Status end = sub.status();
    while (sub.ok()) {
      FilerClient::EventStream* stream;
      {
        std::lock_guard lock(mu_);
        stream = stream_.get();
      }
      auto ev = std::make_optional<filer::Event>();
      if (!stream->Next(&*ev)) {
        end = stream->Finish();
        break;
      }
      failures = 0;
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
      std::unique_lock lock(mu_);
      stream_.reset();
      if (stopping_) return;
      if (failures++ == 0) {
        spdlog::warn("filer event stream ended ({}); resuming", end);
      }
      // Whatever happened while we were away may not be replayed exactly: be safe.
      if (next_seq == 0 || failures > 1) {
        lock.unlock();
        fs_->OnReset(notifier_);
        lock.lock();
      }
      cv_.wait_for(lock, std::chrono::milliseconds(std::min(5000, 200 * failures)), [&] { return stopping_; });
      if (stopping_) return;
    }
  }
}

}  // namespace kelp::mount
