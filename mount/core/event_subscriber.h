// EventSubscriber: a thread that follows the filer's event stream (Subscribe) for the mounted
// subtree, other clients' changes only (skip_own), and hands each event to Filesystem::OnEvent,
// which drops cached metadata and tells the kernel (fuse_lowlevel_notify_inval_*) — from this
// thread, never from inside a FUSE request. A broken stream is resumed after the last event seen; a
// gap the filer can no longer fill arrives as EVENT_RESET and drops every cache.
//
// Thread-safety: Start/Stop from the owner thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "mount/core/clients.h"
#include "shared/metrics.h"
#include "shared/mutex.h"

namespace kelp::mount {

class Filesystem;
class KernelNotifier;

class EventSubscriber {
 public:
  EventSubscriber(FilerClient* meta, Filesystem* fs, KernelNotifier* notifier, std::string path_prefix,
                  std::string client_name);
  ~EventSubscriber() { Stop(); }

  void Start();
  void Stop();
  // The sequence of the last event applied (0 before the first).
  uint64_t last_seq() const { return last_seq_.load(); }

 private:
  void Loop();

  FilerClient* const meta_;
  Filesystem* const fs_;
  KernelNotifier* const notifier_;
  const std::string prefix_;
  const std::string client_name_;
  // Stop() cancels the stream under it, which takes the RPC connection's locks
  // (shared/rpc/client.cc): those come after it. Released around Subscribe, Next and OnReset.
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<FilerClient::EventStream> stream_ ABSL_GUARDED_BY(mu_);  // to Cancel() from Stop()
  std::atomic<uint64_t> last_seq_{0};
  Counter* const events_;  // kelp_mount_events_total
  std::thread thread_;
};

}  // namespace kelp::mount
