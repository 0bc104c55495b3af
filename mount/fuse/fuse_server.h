// FuseServer: the libfuse low-level session of a mount: builds the operation table from the
// ops_* groups, mounts, runs the request loop (device_loop.h) on its own thread, and
// unmounts. It also implements KernelNotifier (fuse_lowlevel_notify_inval_*) for the event
// subscriber.
//
// Thread-safety: Mount/Run/Unmount from the owner (main) thread; the notifier methods from the
// subscriber thread.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "mount/core/filesystem.h"
#include "mount/fuse/fuse_context.h"
#include "mount/fuse/uring_loop.h"
#include "shared/mutex.h"

namespace kelp::mount::fuse {

struct FuseOptions {
  std::string mountpoint;
  std::string fsname = "kelp";
  bool read_only = false;
  bool allow_others = false;
  bool writeback_cache = false;
  bool kill_priv_v2 = true;  // see raw_io.h
  // Requests over io_uring when the kernel offers it (uring_loop.h); else /dev/fuse alone. Run as
  // root, Mount() also sets the fuse module's enable_uring parameter (system-wide). Default: true.
  bool uring = true;
  bool debug = false;
  int max_threads = 16;
  // How long the thread that reads the device polls it before it sleeps (DeviceLoop).
  std::chrono::microseconds busy_poll{0};
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
};

class FuseServer : public KernelNotifier {
 public:
  FuseServer(Filesystem* fs, FuseOptions options);
  ~FuseServer() override;

  // Creates the session and mounts it.
  absl::Status Mount();
  // Starts the request loop on a thread; on_exit runs on that thread when the loop ends (an
  // external unmount, or Unmount()).
  void Start(std::function<void()> on_exit);
  bool running() const { return running_.load(); }
  // Ends the loop, unmounts and waits for the loop thread. Idempotent.
  void Unmount();

  void InvalidateInode(uint64_t ino, bool data) override;
  void InvalidateEntry(uint64_t parent, std::string_view name) override;

 private:
  Filesystem* const fs_;
  const FuseOptions opts_;
  FuseContext ctx_;
  fuse_session* se_ = nullptr;
  bool mounted_ = false;
  int conn_id_ = -1;  // /sys/fs/fuse/connections/<id>
  std::atomic<bool> running_{false};
  std::thread loop_;
  mutable Mutex uring_mu_;
  std::unique_ptr<UringLoop> uring_ ABSL_GUARDED_BY(uring_mu_);
  int uring_threads_ ABSL_GUARDED_BY(uring_mu_) = 0;

  // The device hook's calls around the INIT reply (raw_io.h).
  bool PrepareUring(uint32_t max_write, uint32_t max_pages);
  void StartUring(bool taken);
  void StopUring();
};

}  // namespace kelp::mount::fuse
