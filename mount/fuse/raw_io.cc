#include "mount/fuse/raw_io.h"

#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "mount/fuse/fuse_context.h"

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
  const char* p = static_cast<const char*>(buf);
  fuse_in_header h;
  std::memcpy(&h, p, sizeof h);
  const char* body = p + sizeof h;
  size_t body_len = static_cast<size_t>(n) - sizeof h;
  switch (h.opcode) {
    case FUSE_WRITE:
      t_kill_suidgid = HasFlag(body, body_len, &fuse_write_in::write_flags, FUSE_WRITE_KILL_SUIDGID);
      break;
    case FUSE_SETATTR:
      t_kill_suidgid = HasFlag(body, body_len, &fuse_setattr_in::valid, FATTR_KILL_SUIDGID);
      break;
    case FUSE_INIT: {
      fuse_init_in in;  // the kernel's offer; older kernels send a shorter struct
      std::memset(&in, 0, sizeof in);
      std::memcpy(&in, body, std::min(body_len, sizeof in));
      auto* raw = &static_cast<FuseContext*>(userdata)->raw;
      if (raw->want_killpriv_v2 && in.major == 7 && in.minor >= 33 && (in.flags & FUSE_HANDLE_KILLPRIV_V2) != 0) {
        raw->init_unique.store(h.unique);
      }
      break;
    }
    default:
      break;
  }
  return n;
}

// Writes one reply or notification; adds FUSE_HANDLE_KILLPRIV_V2 to the INIT reply.
ssize_t Writev(int fd, struct iovec* iov, int count, void* userdata) {
  auto* raw = &static_cast<FuseContext*>(userdata)->raw;
  uint64_t init = raw->init_unique.load(std::memory_order_relaxed);
  if (init != 0 && count >= 2 && iov[0].iov_len >= sizeof(fuse_out_header) &&
      iov[1].iov_len >= offsetof(fuse_init_out, flags) + sizeof(uint32_t)) {
    fuse_out_header h;
    std::memcpy(&h, iov[0].iov_base, sizeof h);
    if (h.unique == init && h.error == 0) {
      auto* out = static_cast<char*>(iov[1].iov_base) + offsetof(fuse_init_out, flags);
      uint32_t flags;
      std::memcpy(&flags, out, sizeof flags);
      flags |= FUSE_HANDLE_KILLPRIV_V2;
      std::memcpy(out, &flags, sizeof flags);
      raw->init_unique.store(0);
    }
  }
  return ::writev(fd, iov, count);
}

}  // namespace

absl::Status InstallRawIo(fuse_session* se) {
  static const fuse_custom_io io = {Writev, Read, nullptr, nullptr};
  int fd = fuse_session_fd(se);
  if (fd < 0) return absl::FailedPreconditionError("the FUSE session is not mounted");
  if (fuse_session_custom_io(se, &io, fd) != 0) return absl::InternalError("libfuse refused the device hook");
  return absl::OkStatus();
}

bool RequestKillsSuidGid() { return t_kill_suidgid; }

}  // namespace kelp::mount::fuse
