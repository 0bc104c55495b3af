// The mount's own read and write of /dev/fuse (libfuse's custom I/O hook), for the two things
// Debian 12's libfuse (3.14) does not do:
//
// - It cannot ask for FUSE_HANDLE_KILLPRIV_V2. Without it the kernel asks the filesystem for
//   the file's security.capability before every write (a GETXATTR round trip per WRITE: half of
//   the requests of 4 KiB random writes). With it the kernel remembers that a file has no
//   capability and no suid/sgid bit (S_NOSEC) and asks once, and the filesystem clears the
//   suid and sgid bits itself on write, truncate and chown. The hook sets the flag in the INIT
//   reply when the kernel offered it.
// - It drops the "clear suid/sgid" flag of a WRITE (FUSE_WRITE_KILL_SUIDGID) and of a SETATTR
//   (FATTR_KILL_SUIDGID). The hook reads it from the request and keeps it for the worker thread
//   that read the request: libfuse's loop processes a request on the thread that read it.
//
// - It cannot ask for FUSE-over-io-uring (uring_loop.h). The hook sets the flag in the INIT
//   reply when the kernel offered it, the mount wants it and its rings could be set up
//   (prepare_uring), and once the kernel took the reply lets them start (start_uring); a reply
//   to a request that came over the ring is committed there instead of written to /dev/fuse.
//
// Thread-safety: the hooks run on any FUSE worker thread; RequestKillsSuidGid is per thread.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"

namespace kelp::mount::fuse {

struct RawIoState {
  bool want_killpriv_v2 = true;
  bool want_uring = false;
  // Sets up the ring before the INIT reply asks for it, with the reply's max_write and
  // max_pages (they bound the ring's payload buffers); false: the reply does not ask.
  std::function<bool(uint32_t max_write, uint32_t max_pages)> prepare_uring;
  // After the INIT reply that asked for the ring was written: taken = the kernel took it.
  std::function<void(bool taken)> start_uring;
  std::atomic<uint64_t> init_unique{0};  // the INIT request whose reply gets flags; 0: none
  std::atomic<bool> add_killpriv_v2{false};
  std::atomic<bool> add_uring{false};
};

// Installs the hook on a mounted session (after fuse_session_mount, before the loop starts). Its
// state is the session's FuseContext::raw.
absl::Status InstallRawIo(fuse_session* se);

// Notes what the hooks keep of a request the calling thread is about to run (msg: as /dev/fuse
// delivers it): the ring's threads call it for the requests they rebuild.
void NoteRequest(const void* msg, size_t len);

// Whether the request this thread is processing asks the filesystem to clear the suid and sgid
// bits (the kernel sets it for a write or truncate by a process without CAP_FSETID, and for a
// chown of anything but a directory).
bool RequestKillsSuidGid();

// The mode after clearing what a write, truncate or chown clears: suid always, sgid when the
// group may execute (sgid without group execute marks mandatory locking, and stays).
inline uint32_t ModeWithoutSuidGid(uint32_t mode) {
  uint32_t m = mode & ~04000u;
  if ((m & 02010u) == 02010u) m &= ~02000u;
  return m;
}

}  // namespace kelp::mount::fuse
