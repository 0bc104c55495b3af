#include "mount/mount_options.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "shared/hash.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {

uint32_t MountOptions::umask_bits() const {
  uint32_t v = 0;
  if (!kelp::ParseInt(umask, &v, 8)) return 022;
  return v & 0777;
}

void AddMountFlags(FlagSet& flags, MountOptions& o) {
  flags.Add("dir", &o.dir, "mount point (required): an existing empty directory");
  flags.Add("filer", &o.filer,
            "filer HTTP host:port (metadata calls use the same port); several, comma-separated, of filers sharing one "
            "store: the mount moves to the next when one cannot be reached");
  flags.Add("filer.path", &o.filer_path, "directory of the filer shown as the mount's root");
  flags.Add("chunkSizeLimitMB", &o.chunk_size_limit_mb,
            "dirty data is buffered and uploaded in chunks of this size, in MiB");
  flags.Add("concurrentWriters", &o.concurrent_writers, "chunk uploads running at once");
  flags.Add("writeBufferSizeMB", &o.write_buffer_size_mb,
            "bound on dirty data held in memory, in MiB; writers wait for uploads beyond it");
  flags.Add("journalMaxKB", &o.journal_max_kb,
            "an fsync of at most this many dirty KiB of a file journals them with its metadata (one device "
            "flush); 0 = never");
  flags.Add("journalMemoryMB", &o.journal_memory_mb,
            "journaled bytes (see -journalMaxKB) kept in memory to read them back, in MiB; past it they go to "
            "the read cache (without one, a file reads them from the filer again)");
  flags.Add("syncAheadKB", &o.sync_ahead_kb,
            "an fsync that commits new data also starts durable commits of other open files' small dirty data "
            "(each within -journalMaxKB), up to this many KiB in all, so their own fsyncs find it done and the "
            "filer syncs its WAL once for several; 0 = never");
  flags.Add("unlinkBehind", &o.unlink_behind,
            "an unlink of a closed file with one link returns at once and reaches the filer in the background, "
            "at most this many outstanding (a later change of that directory, its listing or its fsync waits for "
            "them); 0 = every unlink waits for the filer");
  flags.Add("replication", &o.replication, "replication \"xyz\" of new chunks (empty = filer default)");
  flags.Add("collection", &o.collection, "collection of new chunks");
  flags.Add("readOnly", &o.read_only, "mount read-only");
  flags.Add("allowOthers", &o.allow_others, "let other users access the mount (FUSE allow_other)");
  flags.Add("umask", &o.umask, "octal bits cleared from the mode of new files and directories");
  flags.Add("dirAutoCreate", &o.dir_auto_create, "create -dir if it does not exist");
  flags.Add("nonempty", &o.nonempty, "mount over a non-empty -dir");
  flags.Add("attrTimeout", &o.attr_timeout, "attribute cache time, in seconds (the filer's events invalidate sooner)");
  flags.Add("entryTimeout", &o.entry_timeout, "name cache time (also for missing names), in seconds (events invalidate sooner)");
  flags.Add("writebackCache", &o.writeback_cache, "FUSE writeback cache: the kernel gathers small writes");
  flags.Add("killPrivV2", &o.kill_priv_v2,
            "the mount clears suid/sgid on write, truncate and chown (FUSE_HANDLE_KILLPRIV_V2), so the kernel "
            "does not ask for security.capability before every write");
  flags.Add(
      "fuseUring", &o.fuse_uring,
      "FUSE requests over io_uring when the kernel offers it (Linux 6.14 and later): each request "
      "is served on the CPU of the program that made it. Run as root, the mount sets the fuse "
      "module's parameter /sys/module/fuse/parameters/enable_uring to Y (system-wide, and left "
      "so); "
      "false = /dev/fuse alone, and the parameter untouched");
  flags.Add(
      "maxThreads", &o.max_threads,
      "FUSE worker threads at most: those reading /dev/fuse, and over io_uring as many again, "
      "-maxThreads / CPUs (at least 2) on each CPU");
  flags.Add(
      "fuseBusyPollMicros", &o.fuse_busy_poll_us,
      "after each request the thread reading the FUSE device polls it this long, in microseconds, "
      "before it sleeps: a program's next request is then read without a wake-up (not while the "
      "mount's own uploads, unlinks behind or read-ahead run); 0 = sleep at once");
  flags.Add("readAheadMB", &o.read_ahead_mb, "read-ahead window for sequential readers, in MiB; 0 = none");
  flags.Add("localReads", &o.local_reads,
            "read whole blobs of volume servers on this machine (on a loopback address) straight "
            "from their .dat files, and keep no copy of those read-ahead or written in the read "
            "cache; false = every read over HTTP");
  flags.Add("rpcTimeoutMs", &o.rpc_timeout_ms, "timeout of one metadata RPC, in ms");
  flags.Add(
      "rpcReplyPollMicros", &o.rpc_reply_poll_us,
      "a thread waiting alone for a filer reply polls the socket before it sleeps, for three "
      "times as long as that method's replies lately took and at most this long, in "
      "microseconds (not for methods whose replies take more than twice this): the reply then "
      "needs no wake-up of a sleeping CPU; 0 = sleep at once");
  flags.Add("connectTimeoutMs", &o.connect_timeout_ms, "timeout of the first connection to the filer, in ms");
  flags.Add("metricsPort", &o.metrics_port, "port of an HTTP endpoint with /metrics and /status on 127.0.0.1; 0 = none");
  flags.Add("debug", &o.debug, "log every FUSE request and debug details");
}

absl::Status ValidateMountOptions(MountOptions& o) {
  if (o.dir.empty()) return absl::InvalidArgumentError("-dir is required (the mount point)");
  if (o.chunk_size_limit_mb < 1 || o.chunk_size_limit_mb > 1024) {
    return absl::InvalidArgumentError("-chunkSizeLimitMB must be between 1 and 1024");
  }
  if (o.unlink_behind > 65536) return absl::InvalidArgumentError("-unlinkBehind must be at most 65536");
  if (o.concurrent_writers < 1 || o.concurrent_writers > 256) {
    return absl::InvalidArgumentError("-concurrentWriters must be between 1 and 256");
  }
  if (o.write_buffer_size_mb < 2 * o.chunk_size_limit_mb) {
    return absl::InvalidArgumentError(
        kelp::StrCat("-writeBufferSizeMB must be at least twice -chunkSizeLimitMB (", 2 * o.chunk_size_limit_mb, ")"));
  }
  uint32_t um = 0;
  if (!kelp::ParseInt(o.umask, &um, 8) || um > 0777) {
    return absl::InvalidArgumentError(kelp::StrCat("-umask \"", o.umask, "\" is not an octal mode like 022"));
  }
  if (o.journal_max_kb > 1024) return absl::InvalidArgumentError("-journalMaxKB must be at most 1024");
  if (o.journal_memory_mb < 1 || o.journal_memory_mb > (1 << 20)) {
    return absl::InvalidArgumentError("-journalMemoryMB must be between 1 and 1048576");
  }
  if (o.attr_timeout < 0 || o.entry_timeout < 0) {
    return absl::InvalidArgumentError("-attrTimeout and -entryTimeout must not be negative");
  }
  if (o.fuse_busy_poll_us < 0 || o.fuse_busy_poll_us > 10000) {
    return absl::InvalidArgumentError("-fuseBusyPollMicros must be between 0 and 10000");
  }
  if (o.rpc_reply_poll_us < 0 || o.rpc_reply_poll_us > 10000) {
    return absl::InvalidArgumentError("-rpcReplyPollMicros must be between 0 and 10000");
  }
  if (o.max_threads < 1 || o.max_threads > 1024) {
    return absl::InvalidArgumentError("-maxThreads must be between 1 and 1024");
  }
  if (o.filer_path.empty() || o.filer_path[0] != '/') {
    return absl::InvalidArgumentError("-filer.path must be an absolute path like /data");
  }
  if (o.filer.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(kelp::StrCat("-filer \"", o.filer, "\" is not host:port"));
  }
  if (!o.replication.empty()) {
    if (o.replication.size() != 3 || o.replication.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(kelp::StrCat("-replication \"", o.replication, "\" is not three digits like 001"));
    }
  }

  struct stat st;
  if (stat(o.dir.c_str(), &st) != 0) {
    if (errno == ENOENT && o.dir_auto_create) {
      if (mkdir(o.dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return PosixError(errno, kelp::StrCat("cannot create -dir ", o.dir, ": ", strerror(errno)));
      }
      if (stat(o.dir.c_str(), &st) != 0) return ErrnoStatus(kelp::StrCat("-dir ", o.dir));
    } else if (errno == ENOENT) {
      return PosixError(ENOENT, kelp::StrCat("-dir ", o.dir, " does not exist (create it, or add -dirAutoCreate)"));
    } else if (errno == ENOTCONN) {
      return PosixError(ENOTCONN, kelp::StrCat("-dir ", o.dir, " is a dead mount; recover it with: fusermount3 -uz ", o.dir));
    } else {
      return PosixError(errno, kelp::StrCat("-dir ", o.dir, ": ", strerror(errno)));
    }
  }
  if (!S_ISDIR(st.st_mode)) return PosixError(ENOTDIR, kelp::StrCat("-dir ", o.dir, " is not a directory"));
  if (!o.nonempty) {
    DIR* d = opendir(o.dir.c_str());
    if (d == nullptr) return PosixError(errno, kelp::StrCat("-dir ", o.dir, ": ", strerror(errno)));
    bool empty = true;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        empty = false;
        break;
      }
    }
    closedir(d);
    if (!empty) {
      return PosixError(ENOTEMPTY, kelp::StrCat("-dir ", o.dir, " is not empty (add -nonempty to mount over it)"));
    }
  }
  return absl::OkStatus();
}

std::string DefaultCacheDir(const MountOptions& o) {
  std::string mount_point = o.dir;
  if (char* real = realpath(o.dir.c_str(), nullptr)) {
    mount_point = real;
    free(real);
  }
  std::string filer_path = o.filer_path;
  while (filer_path.size() > 1 && filer_path.back() == '/') filer_path.pop_back();
  // NUL separators: no two different tuples hash the same text.
  std::string key =
      kelp::StrCat(o.filer, std::string_view("\0", 1), filer_path, std::string_view("\0", 1),
                   mount_point, std::string_view("\0", 1), static_cast<uint64_t>(getuid()));
  char id[17];
  std::snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(kelp::Hash64(key)));
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return kelp::StrCat(base, "/kelp-cache-", id);
}

}  // namespace kelp::mount
