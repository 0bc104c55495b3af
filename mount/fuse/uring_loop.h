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
// kernel writes a request into); threads_per_queue threads serve each online CPU's queue, so
// that a request that waits (a filer call, an upload) holds one thread and the others go on.
// A thread rebuilds the request as /dev/fuse would have delivered it (header, the operation's
// own struct, then the payload: contiguous in the entry's buffer, without copying the payload)
// and runs it through libfuse; the reply libfuse writes through the device hook (raw_io.h) is
// copied into the entry and committed with the next fetch in one submission, when the callback
// has returned. Every reply of the mount is made on the thread that runs the request
// (fuse_context.h), which is what lets the hook find the entry; a request left without a reply
// is answered EIO. Because the reply reaches the kernel only after the callback returned, a
// callback must not wait for the kernel after its reply (a notification that invalidates page
// ranges would wait for page locks the request holds; an attribute invalidation is fine).
//
// Forgets, interrupts and notifications still use /dev/fuse: the device loop keeps reading it.
//
// Startup: Prepare() sets up every ring before the INIT reply asks for the ring (the kernel
// holds every request from then on until each CPU's queue has an entry: a ring that could not
// be set up must never be asked for), and Go() lets the threads register their entries once
// the kernel took that reply. A registration the kernel refuses makes it fall back to
// /dev/fuse. A commit the kernel refuses registers the entry anew rather than leave its queue
// one thread short.
//
// kelp_mount_fuse_uring_requests_total counts the requests that came over the ring.
//
// Thread-safety: Prepare, Go and Stop from one thread; CommitReply and ReplyBuffer from any
// thread (they act only for a ring request the calling thread runs).
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace kelp::mount::fuse {

// The kernel's ring ABI (include/uapi/linux/fuse.h, 7.42), absent from Debian 12's
// <linux/fuse.h>.
namespace uring_abi {
// The FUSE_INIT flag (in flags2) asking for the ring.
inline constexpr uint64_t kFuseOverIoUring = 1ULL << 41;
inline constexpr size_t kInOutSize = 128;  // the in header of a request; the out header of a reply
inline constexpr size_t kOpInSize = 128;   // the operation's own struct (fuse_write_in, ...)
struct EntInOut {
  uint64_t flags;
  uint64_t commit_id;   // names the request in the commit
  uint32_t payload_sz;  // bytes in the payload buffer, either way
  uint32_t padding;
  uint64_t reserved;
};
struct ReqHeader {  // an entry's header buffer
  char in_out[kInOutSize];
  char op_in[kOpInSize];
  EntInOut ent;
};
static_assert(sizeof(ReqHeader) == 288);
struct CmdReq {  // in the SQE's command area
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
inline constexpr uint32_t kCmdRegister = 1;
inline constexpr uint32_t kCmdCommitAndFetch = 2;
}  // namespace uring_abi

// The CPUs of a kernel CPU list ("0-1", "0", "0-3,8-11"); empty when it does not parse.
std::vector<bool> ParseCpuList(std::string_view list);

// Rebuilds the request the kernel wrote into an entry (header; payload at `payload`, with
// `headroom` bytes writable in front of it) as /dev/fuse delivers it: the in header and the
// operation's struct copied just in front of the payload. Returns where it starts and sets
// *len, or null when the sizes the kernel gave do not add up.
char* RebuildRequest(const uring_abi::ReqHeader& header, char* payload, size_t headroom,
                     size_t payload_capacity, size_t* len);

// Copies a reply's arguments (iov[1..count), after the out header) to payload, one after the
// other (an argument already in place is not copied); their bytes, or nullopt when they exceed
// capacity.
std::optional<size_t> CopyReplyArgs(const struct iovec* iov, int count, char* payload,
                                    size_t capacity);

class UringLoop {
 public:
  struct Options {
    // Threads serving each online CPU's queue; a possible CPU that is not online gets one.
    // Default: 4.
    int threads_per_queue = 4;
    // The largest request payload the kernel sends, in bytes: max(max_write, max_pages * page
    // size). Default: 1 MiB.
    size_t payload_size = 1 << 20;
  };

  // Sets up the rings of every CPU's queue, and their threads, which wait for Go(). fd is the
  // session's /dev/fuse. An error (io_uring disabled or refused, no memory, no CPU list) means
  // the INIT reply must not ask for the ring.
  static absl::StatusOr<std::unique_ptr<UringLoop>> Prepare(fuse_session* se, int fd,
                                                            Options options);
  ~UringLoop();
  UringLoop(const UringLoop&) = delete;
  UringLoop& operator=(const UringLoop&) = delete;

  // The INIT reply that asked for the ring was written (taken: the threads register their
  // entries) or failed (they end).
  void Go(bool taken);
  // Stops the threads (after the connection ended: a request still queued to the ring would
  // wait for ever). Idempotent.
  void Stop();

  // When the reply in iov (iov[0]: struct fuse_out_header) answers the request the calling
  // thread runs from a ring entry, puts it in the entry for the commit and returns the bytes
  // it took; else nullopt (the reply goes to /dev/fuse).
  static std::optional<ssize_t> CommitReply(const struct iovec* iov, int count);

  // Where a reply of up to size bytes to the request the calling thread runs from a ring
  // entry may be built in place (the entry's payload buffer: the commit then copies nothing),
  // or null (not a ring request, or too large). Valid until the reply.
  static char* ReplyBuffer(size_t size);

  class Queue;  // one thread's ring and entry (uring_loop.cc)

 private:
  UringLoop() = default;
  int stop_fd_ = -1;  // an eventfd every ring polls: written once, it wakes them all
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
  std::promise<bool> go_;
  bool went_ = false;
};

}  // namespace kelp::mount::fuse
