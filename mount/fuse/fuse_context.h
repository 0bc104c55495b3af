// What every FUSE callback shares: the Filesystem, the entry/attr timeouts, the mapping between
// FUSE inode numbers and the filer's, and the helpers that turn results into exactly one
// fuse_reply_* per request. Callbacks are split by operation group (ops_*.cc); each runs its
// body through Guarded(), so no exception ever escapes into libfuse.
//
// Thread-safety: FuseContext is immutable after the session starts (but `raw`, set once by the
// INIT exchange); callbacks run on any FUSE worker thread.
#pragma once

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <cstdint>
#include <exception>
#include <optional>

#include "absl/status/status.h"
#include "mount/core/filesystem.h"
#include "mount/fuse/raw_io.h"
#include "shared/log.h"
#include "shared/status.h"

namespace kelp::mount::fuse {

struct FuseContext {
  Filesystem* fs = nullptr;
  double attr_timeout = 1.0;
  double entry_timeout = 1.0;
  uint64_t root = 1;  // the filer inode shown as FUSE_ROOT_ID
  bool debug = false;
  bool writeback_cache = false;
  uint32_t blksize = 1 << 20;
  fuse_session* se = nullptr;  // for notifications sent after a reply
  RawIoState raw;  // the device hook's state (raw_io.h); its atomics are the one mutable part

  // FUSE's root is inode 1; the filer's root of the mount is `root`. The two swap places; every
  // other number is the filer's own. The mapping is its own inverse.
  uint64_t Swap(uint64_t ino) const {
    if (ino == FUSE_ROOT_ID) return root;
    if (ino == root) return FUSE_ROOT_ID;
    return ino;
  }
  uint64_t ToFiler(fuse_ino_t ino) const { return Swap(ino); }
  fuse_ino_t ToFuse(uint64_t ino) const { return Swap(ino); }
};

inline FuseContext* Ctx(fuse_req_t req) { return static_cast<FuseContext*>(fuse_req_userdata(req)); }

void ToStat(const FuseContext& c, const Attr& a, struct stat* st);
Caller CallerOf(fuse_req_t req);

// Replies with the errno the status carries (EIO when it carries none).
void ReplyStatus(fuse_req_t req, const absl::Status& s, const char* op);
void ReplyEntry(fuse_req_t req, const Attr& a);
void ReplyAttr(fuse_req_t req, const Attr& a);

// For a request whose "clear suid/sgid" flag is set (raw_io.h): the inode's mode without the bits
// a write, truncate or chown clears, or nullopt when it has none of them.
absl::StatusOr<std::optional<uint32_t>> ModeToClearSuidGid(FuseContext& c, uint64_t ino);

// Runs body; an escaping exception is logged and answered with EIO. body must reply exactly
// once as its last action, so a throw can only happen before any reply.
template <typename Body>
void Guarded(fuse_req_t req, const char* op, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    spdlog::error("fuse {}: {}", op, e.what());
    fuse_reply_err(req, EIO);
  } catch (...) {
    spdlog::error("fuse {}: unknown exception", op);
    fuse_reply_err(req, EIO);
  }
}

// The operation groups fill in their callbacks.
void AddEntryOps(fuse_lowlevel_ops* ops);  // ops_entry.cc: names and attributes
void AddFileOps(fuse_lowlevel_ops* ops);   // ops_file.cc: open files
void AddDirOps(fuse_lowlevel_ops* ops);    // ops_dir.cc: directory listing
void AddMiscOps(fuse_lowlevel_ops* ops);   // ops_misc.cc: init/destroy, statfs, xattrs

}  // namespace kelp::mount::fuse
