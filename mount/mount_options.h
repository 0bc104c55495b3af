// Options of `kelp mount`. Every field says its default and unit; AddMountFlags registers them
// as the weed-style flags and prints the same text in -h.
//
// Thread-safety: a plain value, built on the main thread before the mount starts and read-only
// afterwards.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "shared/flags.h"

namespace kelp::mount {

struct MountOptions {
  // Mount point. Must exist and be an empty directory unless nonempty. Required.
  std::string dir;
  // Filer to mount, HTTP host:port (metadata calls go to the same port). Default: localhost:8888.
  std::string filer = "localhost:8888";
  // Directory of the filer shown as the mount's root. Default: "/".
  std::string filer_path = "/";
  // Dirty data of a file is buffered and uploaded in chunks of this size, in MiB. Default: 4.
  uint64_t chunk_size_limit_mb = 4;
  // The read cache's flags (-cacheCapacityMB, -cacheDir, ...) belong to the cache:
  // mount/cache/cache_flags.h registers them.
  // Chunk uploads running at once (background and flush). Default: 8.
  int concurrent_writers = 8;
  // Bound on dirty (not yet uploaded) data in memory, in MiB. Writers block while it is
  // reached until uploads free room. Default: 256.
  uint64_t write_buffer_size_mb = 256;
  // An fsync of at most this many dirty bytes of a file sends them in its commit to the filer
  // (journaled with the metadata: one device flush) instead of uploading them to a volume
  // server first; 0 = always upload. At most 1024. Default: 256.
  uint64_t journal_max_kb = 256;
  // Bytes of journaled chunks (committed by such fsyncs) the mount keeps in memory to read
  // them back, in MiB; past it they go to the read cache (without one, a file drops its copy
  // and fetches its journaled bytes from the filer again). Default: 256.
  uint64_t journal_memory_mb = 256;
  uint64_t sync_ahead_kb = 1024;
  uint64_t unlink_behind = 64;
  // Replication of new chunks ("xyz", as SeaweedFS); empty = the filer's default.
  std::string replication;
  // Collection of new chunks; empty = none.
  std::string collection;
  // Mount read-only. Default: false.
  bool read_only = false;
  // Let other users access the mount (FUSE allow_other). Default: false.
  bool allow_others = false;
  // Bits cleared from the mode of new files and directories, octal text, on top of the
  // caller's own umask (which the kernel applies). Default: "000" (POSIX: the caller decides).
  std::string umask = "000";
  // Create -dir if it does not exist. Default: false.
  bool dir_auto_create = false;
  // Mount even if -dir is not empty. Default: false.
  bool nonempty = false;
  // How long the kernel (and the mount) cache attributes, in seconds. The filer's event
  // stream invalidates them as soon as another client changes them. Default: 30.
  double attr_timeout = 30.0;
  // How long the kernel (and the mount) cache names, including negative lookups, in seconds.
  // The event stream invalidates them as for attributes. Default: 30.
  double entry_timeout = 30.0;
  // FUSE writeback cache (the kernel gathers writes). Default: false.
  bool writeback_cache = false;
  // The mount clears suid/sgid itself (FUSE_HANDLE_KILLPRIV_V2; see mount/fuse/raw_io.h). Default: true.
  bool kill_priv_v2 = true;
  // FUSE requests over io_uring when the kernel offers it (Linux 6.14+; mount/fuse/uring_loop.h).
  // Run as root, the mount sets the fuse module's parameter enable_uring (system-wide).
  // Default: true.
  bool fuse_uring = true;
  // FUSE worker threads at most (reading /dev/fuse; over io_uring as many again, this / CPUs
  // and at least 2 on each CPU). Default: 16.
  int max_threads = 16;
  // How long the thread reading the FUSE device polls it for the next request before it
  // sleeps, in microseconds; 0 = it sleeps at once. Default: 30.
  int fuse_busy_poll_us = 30;
  // Read-ahead window for sequential readers, in MiB; 0 = none. Up to 16 windows are held
  // in memory at once. Default: 4.
  uint64_t read_ahead_mb = 4;
  // Whole blobs of volume servers on this machine are read from their .dat files, and left out
  // of the read cache's write-through and read-ahead copies (docs/mount.md, "Local reads").
  // Default: true.
  bool local_reads = true;
  // Timeout of one metadata RPC, in ms. Default: 10000.
  int rpc_timeout_ms = 10000;
  // How long at most a thread alone waiting for a filer reply polls the socket before it
  // sleeps, in microseconds (rpc::Channel::Options::reply_poll); 0 = it sleeps at once.
  // Default: 400.
  int rpc_reply_poll_us = 400;
  // Timeout of the first connection to the filer, in ms. Default: 3000.
  int connect_timeout_ms = 3000;
  // Port of the mount's HTTP endpoint (/metrics, /status) on 127.0.0.1; 0 = none. Default: 0.
  int metrics_port = 0;
  // Log FUSE requests and debug details. Default: false.
  bool debug = false;

  uint64_t chunk_size() const { return chunk_size_limit_mb << 20; }
  uint32_t umask_bits() const;
};

void AddMountFlags(FlagSet& flags, MountOptions& opts);

// Checks values that parse but make no sense, and the mount point (exists, a directory,
// empty unless nonempty; created when dir_auto_create). One-line errors.
absl::Status ValidateMountOptions(MountOptions& opts);

// The -cacheDir of a mount that names none: <$TMPDIR or /tmp>/kelp-cache-<16 hex digits>, the
// digits a hash of the filer, -filer.path, the mount point's absolute path and the user (as
// SeaweedFS keys its cache directory), so every mount on a machine gets a disk cache of its own
// and a remount of the same thing finds its cache again. Call after ValidateMountOptions (the
// mount point exists then).
std::string DefaultCacheDir(const MountOptions& opts);

}  // namespace kelp::mount
