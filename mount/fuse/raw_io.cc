#include "mount/fuse/raw_io.h"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>

#include "mount/fuse/fuse_context.h"
#include "mount/fuse/uring_loop.h"

namespace kelp::mount::fuse {
namespace {

thread_local bool t_kill_suidgid = false;

// Whether the request body (a struct In) has bit set in its field; false when it is too short.
template <typename In>
bool HasFlag(const char* body, size_t len, uint32_t In::*field, uint32_t bit) {
  In in;
  if (len < sizeof in) return false;
  std::memcpy(&in, body, sizeof in);
  return (in.*field & bit) != 0;
}

// Reads one request; notes INIT's offer and a request's "clear suid/sgid" flag.
ssize_t Read(int fd, void* buf, size_t len, void* userdata) {
  ssize_t n = ::read(fd, buf, len);
  t_kill_suidgid = false;
  if (n < static_cast<ssize_t>(sizeof(fuse_in_header))) return n;  // errno is read's
  NoteRequest(buf, static_cast<size_t>(n));
  fuse_in_header h;
  std::memcpy(&h, buf, sizeof h);
  if (h.opcode == FUSE_INIT) {
    fuse_init_in in;  // the kernel's offer; older kernels send a shorter struct
    std::memset(&in, 0, sizeof in);
    std::memcpy(&in, static_cast<const char*>(buf) + sizeof h,
                std::min(static_cast<size_t>(n) - sizeof h, sizeof in));
    auto* raw = &static_cast<FuseContext*>(userdata)->raw;
    bool killpriv = raw->want_killpriv_v2 && in.major == 7 && in.minor >= 33 &&
                    (in.flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
    bool uring = raw->want_uring && in.major == 7 && (in.flags & FUSE_INIT_EXT) != 0 &&
                 (in.flags2 & static_cast<uint32_t>(uring_abi::kFuseOverIoUring >> 32)) != 0;
    raw->add_killpriv_v2.store(killpriv);
    raw->add_uring.store(uring);
    if (killpriv || uring) raw->init_unique.store(h.unique);
  }
  return n;
}

// Writes one reply or notification: to the ring entry its request came from, if it came over
// the ring; adds the flags the mount wants to the INIT reply.
ssize_t Writev(int fd, struct iovec* iov, int count, void* userdata) {
  if (std::optional<ssize_t> n = UringLoop::CommitReply(iov, count)) return *n;
  auto* raw = &static_cast<FuseContext*>(userdata)->raw;
  uint64_t init = raw->init_unique.load(std::memory_order_relaxed);
  bool asked_uring = false;
  if (init != 0 && count >= 2 && iov[0].iov_len >= sizeof(fuse_out_header) &&
      iov[1].iov_len >= offsetof(fuse_init_out, flags2) + sizeof(uint32_t)) {
    fuse_out_header h;
    std::memcpy(&h, iov[0].iov_base, sizeof h);
    if (h.unique == init && h.error == 0) {
      fuse_init_out out;
      std::memset(&out, 0, sizeof out);
      std::memcpy(&out, iov[1].iov_base, std::min(iov[1].iov_len, sizeof out));
      if (raw->add_killpriv_v2.load()) out.flags |= FUSE_HANDLE_KILLPRIV_V2;
      // The kernel holds every request once it took a reply asking for the ring, until each
      // CPU's queue has an entry: ask only when the rings are there.
      if (raw->add_uring.load() && raw->prepare_uring && raw->start_uring &&
          raw->prepare_uring(out.max_write, out.max_pages)) {
        out.flags |= FUSE_INIT_EXT;
        out.flags2 |= static_cast<uint32_t>(uring_abi::kFuseOverIoUring >> 32);
        asked_uring = true;
      }
      std::memcpy(iov[1].iov_base, &out, std::min(iov[1].iov_len, sizeof out));
      raw->init_unique.store(0);
    }
  }
  ssize_t n = ::writev(fd, iov, count);
  // The kernel took the reply (and with it the ring's flag): the ring's entries may register.
  if (asked_uring) {
    int err = errno;
    raw->start_uring(n >= 0);
    errno = err;
  }
  return n;
}

}  // namespace

absl::Status InstallRawIo(fuse_session* se) {
  static const fuse_custom_io io = {Writev, Read, nullptr, nullptr};
  int fd = fuse_session_fd(se);
  if (fd < 0) return absl::FailedPreconditionError("the FUSE session is not mounted");
  if (fuse_session_custom_io(se, &io, fd) != 0) return absl::InternalError("libfuse refused the device hook");
  return absl::OkStatus();
}

void NoteRequest(const void* msg, size_t len) {
  t_kill_suidgid = false;
  fuse_in_header h;
  if (len < sizeof h) return;
  std::memcpy(&h, msg, sizeof h);
  const char* body = static_cast<const char*>(msg) + sizeof h;
  size_t body_len = len - sizeof h;
  switch (h.opcode) {
    case FUSE_WRITE:
      t_kill_suidgid =
          HasFlag(body, body_len, &fuse_write_in::write_flags, FUSE_WRITE_KILL_SUIDGID);
      break;
    case FUSE_SETATTR:
      t_kill_suidgid = HasFlag(body, body_len, &fuse_setattr_in::valid, FATTR_KILL_SUIDGID);
      break;
    default:
      break;
  }
}

bool RequestKillsSuidGid() { return t_kill_suidgid; }

}  // namespace kelp::mount::fuse
