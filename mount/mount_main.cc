// kelp mount: parse flags, connect to the filer, mount, wait for a signal (or an external
// unmount), flush everything dirty, unmount.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include "cmd/commands.h"
#include "filer/client/filer_client.h"
#include "volume/client/blob_client.h"
#include "volume/client/volume_client.h"
#include "mount/cache/cache_flags.h"
#include "mount/cache/tiered_cache.h"
#include "mount/core/filesystem.h"
#include "mount/fuse/fuse_server.h"
#include "mount/mount_options.h"
#include "mount/mount_status.h"
#include "shared/daemon.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/signals.h"
#include "shared/strings.h"
#include "shared/security/security.h"

namespace kelp {

int MountMain(int argc, char** argv) {
  BlockTerminationSignals();
  mount::MountOptions opts;
  FlagSet flags("mount", "kelp mount -dir=/mnt/kelp [flags]",
                "Mounts the filer's namespace at -dir with FUSE. Runs in the foreground (with -daemon, in the\n"
                "background once the mount is live: what mount.kelp, for `mount -t kelp` and fstab, does);\n"
                "SIGINT/SIGTERM flush everything dirty and unmount, so does umount. A mount whose process died\n"
                "is recovered with: fusermount3 -uz DIR");
  mount::AddMountFlags(flags, opts);
  DaemonOptions daemon;
  AddDaemonFlags(flags, daemon);
  mount::cache::CacheFlags cache_flags;
  cache_flags.Register(&flags);
  std::string security_file;
  security::AddSecurityFlag(flags, &security_file);
  flags.ParseOrExit(argc, argv);
  InitLogging(opts.debug ? "debug" : "info");
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "kelp mount: %s\n", std::string(s.message()).c_str());
    return 1;
  };
  if (absl::Status s = security::InstallFromFile(security_file, security::kClientComponent); !s.ok()) return fail(s);
  if (absl::Status s = mount::ValidateMountOptions(opts); !s.ok()) return fail(s);
  // Before any thread exists; the caller returns once NotifyReady below runs (mount.kelp).
  if (daemon.daemon) {
    if (absl::Status s = Daemonize(daemon); !s.ok()) return fail(s);
  }

  filer::FilerClientOptions fco;
  fco.rpc_timeout = std::chrono::milliseconds(opts.rpc_timeout_ms);
  fco.connect_timeout = std::chrono::milliseconds(opts.connect_timeout_ms);
  fco.metrics_label = "mount";
  fco.reply_poll = std::chrono::microseconds(opts.rpc_reply_poll_us);
  filer::FilerClient meta(opts.filer, fco);
  if (absl::Status s = meta.Connect(std::chrono::milliseconds(opts.connect_timeout_ms)); !s.ok()) return fail(s);
  volume::VolumeClient::Options vo;
  vo.connect_timeout_ms = std::min(3000, opts.connect_timeout_ms);
  vo.io_timeout_ms = opts.rpc_timeout_ms;  // a frozen volume server: EIO after -rpcTimeoutMs
  volume::VolumeClient volumes(vo);
  volume::BlobClient::Options bo;
  bo.replication = opts.replication;
  bo.collection = opts.collection;
  bo.metric_prefix = "kelp_mount_blob";
  bo.local_reads = opts.local_reads;
  volume::BlobClient blobs(
      volume::Coordinator{[&meta](const cluster::AssignRequest& r) { return meta.Assign(r); },
                          [&meta](const cluster::LookupVolumeRequest& r) { return meta.LookupVolume(r); }, nullptr},
      &volumes, bo);

  mount::FsOptions fo;
  fo.filer_path = opts.filer_path;
  fo.attr_ttl = std::chrono::nanoseconds(static_cast<int64_t>(opts.attr_timeout * 1e9));
  fo.entry_ttl = std::chrono::nanoseconds(static_cast<int64_t>(opts.entry_timeout * 1e9));
  fo.umask = opts.umask_bits();
  fo.read_only = opts.read_only;
  fo.chunk_size = opts.chunk_size();
  fo.write_buffer = opts.write_buffer_size_mb << 20;
  fo.concurrent_writers = opts.concurrent_writers;
  fo.journal_max = opts.journal_max_kb << 10;
  fo.journal_memory = opts.journal_memory_mb << 20;
  fo.sync_ahead = opts.sync_ahead_kb << 10;
  fo.unlink_behind = opts.unlink_behind;
  fo.read_ahead = opts.read_ahead_mb << 20;
  fo.client_name = kelp::StrCat("kelp mount ", opts.dir, " pid ", getpid());
  // No -cacheDir: a directory of this mount's own (several mounts, each with a disk cache).
  if (cache_flags.dir.empty()) cache_flags.dir = mount::DefaultCacheDir(opts);
  auto cache_opts = cache_flags.ToOptions(opts.chunk_size());
  if (!cache_opts.ok()) {
    std::fprintf(stderr, "kelp mount: %s\n", std::string(cache_opts.status().message()).c_str());
    return 2;
  }
  auto cache = mount::cache::TieredCache::Open(std::move(*cache_opts));
  if (!cache.ok()) {
    std::fprintf(stderr, "kelp mount: %s\n", std::string(cache.status().message()).c_str());
    return 2;
  }
  mount::Filesystem fs(&meta, &blobs, (*cache)->enabled() ? cache->get() : nullptr, fo);
  if (absl::Status s = fs.Start(); !s.ok()) return fail(s);

  mount::fuse::FuseOptions uo;
  uo.mountpoint = opts.dir;
  uo.fsname = kelp::StrCat("kelp:", opts.filer, opts.filer_path);
  uo.read_only = opts.read_only;
  uo.allow_others = opts.allow_others;
  uo.writeback_cache = opts.writeback_cache;
  uo.kill_priv_v2 = opts.kill_priv_v2;
  uo.uring = opts.fuse_uring;
  uo.debug = opts.debug;
  uo.max_threads = opts.max_threads;
  uo.busy_poll = std::chrono::microseconds(opts.fuse_busy_poll_us);
  uo.attr_timeout = opts.attr_timeout;
  uo.entry_timeout = opts.entry_timeout;
  mount::fuse::FuseServer server(&fs, uo);
  if (absl::Status s = server.Mount(); !s.ok()) return fail(s);

  std::atomic<bool> external_unmount{false};
  server.Start([&] {
    // The loop ended by itself (fusermount3 -u): wake the main thread.
    external_unmount = true;
    kill(getpid(), SIGTERM);
  });
  fs.StartEvents(&server);
  mount::MountStatusServer status(&fs, opts.dir, opts.filer);
  if (opts.metrics_port > 0) {
    if (absl::Status s = status.Start(opts.metrics_port); !s.ok()) {
      spdlog::warn("kelp mount: no /metrics endpoint on port {}: {}", opts.metrics_port, s);
    }
  }
  spdlog::info("kelp mount: {} mounted at {} (filer {})", opts.filer_path, opts.dir, opts.filer);
  NotifyReady(kelp::StrCat("mounted ", opts.filer, opts.filer_path, " at ", opts.dir));

  int sig = WaitForTerminationSignal();
  NotifyStopping();
  int rc = 0;
  if (!external_unmount) {
    spdlog::info("kelp mount: signal {}, flushing and unmounting {}", sig, opts.dir);
  } else {
    spdlog::info("kelp mount: {} was unmounted (umount), flushing", opts.dir);
  }
  // Also after an external umount: whatever is still dirty is uploaded and committed.
  if (absl::Status s = fs.FlushAll(); !s.ok()) {
    spdlog::error("kelp mount: flush before unmount failed: {}", s);
    rc = 1;
  }
  server.Unmount();
  status.Stop();
  fs.Stop();
  (*cache)->Close();
  spdlog::info("kelp mount: stopped");
  return rc;
}

}  // namespace kelp
