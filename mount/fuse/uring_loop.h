// UringLoop: the mount's FUSE requests over io_uring (FUSE-over-io-uring, Linux 6.14 and later,
// with the fuse module's parameter enable_uring set).
//
// Over /dev/fuse a request wakes a mount thread wherever it sleeps, and the reply wakes the
// program on its own CPU: on a virtual machine each wake-up across CPUs is an exit to the host.
// Over the ring the kernel hands a request to the queue of the CPU the program runs on, and
// the mount's threads for that queue are pinned to that CPU: the program, the mount thread and
// the program again take turns on one CPU, with no wake-up crossing CPUs (docs/mount.md, "FUSE
// threads").
//
// Each thread owns an io_uring and one ring entry (a header buffer and a payload buffer the
// kernel writes a request into); threads_per_queue threads serve each CPU's queue, so that a
// request that waits (a filer call, an upload) holds one thread and the others go on. A thread
// rebuilds the request as /dev/fuse would have delivered it (header, the operation's own
// struct, then the payload: contiguous in the entry's buffer, without copying the payload)
// and runs it through libfuse; the reply libfuse writes through the device hook (raw_io.h) is
// copied into the entry and committed with the next fetch in one submission. Every reply of
// the mount is made on the thread that runs the request (fuse_context.h), which is what lets
// the hook find the entry: a request left without a reply is answered EIO.
//
// Forgets, interrupts and notifications still use /dev/fuse: the device loop keeps reading it.
//
// kelp_mount_fuse_uring_requests_total counts the requests that came over the ring.
//
// Thread-safety: Start and Stop from one thread; CommitReply from the hook on any thread.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/uio.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace kelp::mount::fuse {

// The kernel's FUSE_INIT flag (in flags2) for the ring, from its ABI 7.42; Debian 12's
// <linux/fuse.h> is older.
inline constexpr uint64_t kFuseOverIoUring = 1ULL << 41;

class UringLoop {
 public:
  struct Options {
    int threads_per_queue = 4;
    // The largest request payload the kernel sends: max(max_write, max_pages * page size).
    size_t payload_size = 1 << 20;
  };

  // Registers the entries with the kernel for every CPU's queue and starts the threads. fd is
  // the session's /dev/fuse; the INIT reply with kFuseOverIoUring must have been written.
  static absl::StatusOr<std::unique_ptr<UringLoop>> Start(fuse_session* se, int fd,
                                                          Options options);
  ~UringLoop();
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;

  // Stops the threads (after the connection ended: a request still queued to the ring would
  // wait for ever). Idempotent.
  void Stop();

  // When the reply in iov (iov[0]: struct fuse_out_header) answers the request the calling
  // thread runs from a ring entry, commits it there and returns the bytes it took; else
  // nullopt (the reply goes to /dev/fuse).
  static std::optional<ssize_t> CommitReply(const struct iovec* iov, int count);

  // Where a reply of up to size bytes to the request the calling thread runs from a ring
  // entry may be built in place (the entry's payload buffer: the commit then copies nothing),
  // or null (not a ring request, or too large). Valid until the reply.
  static char* ReplyBuffer(size_t size);

  class Queue;  // one thread's ring and entry (uring_loop.cc)

 private:
  UringLoop() = default;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
};

}  // namespace kelp::mount::fuse
