// kelp filer: parse flags, start the filer, wait for a signal, stop.
#include "cmd/commands.h"
#include "filer/filer_main.h"
#include "filer/server/filer_server.h"
#include "shared/daemon.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/signals.h"
#include "shared/strings.h"

namespace kelp {

void AddFilerFlags(FlagSet& flags, filer::FilerServerOptions& o, const std::string& prefix) {
  flags.Add(prefix + "dir", &o.dir, "data directory (the rocksdb store lives under <dir>/meta)");
  filer::AddStoreFlags(flags, o.store, prefix);
  flags.Add(prefix + "coordinator.leaseMs", &o.coordinator_lease_ms,
            "filers sharing a store: the coordinator lease, in ms (a dead coordinator is replaced after about this)");
  flags.Add(prefix + "port", &o.port, "HTTP port");
  flags.Add(prefix + "port.grpc", &o.grpc_port, "gRPC port (0 = HTTP port + 10000)");
  flags.Add(prefix + "volumeSizeLimitMB", &o.volume_size_limit_mb, "a volume at or over this size takes no writes, in MiB");
  flags.Add(prefix + "defaultReplication", &o.default_replication, "replication \"xyz\" for writes that name none");
  flags.Add(prefix + "pulseMs", &o.pulse_ms, "heartbeat interval asked of volume servers, in ms");
  flags.Add(prefix + "volumeGrowthCount", &o.growth_count, "volumes allocated when a layout runs out (0 = by copies)");
  AddFilerHttpFlags(flags, o, prefix);
  flags.Add(prefix + "testing.powerCut", &o.testing_power_cut,
            "testing only: keep unsynced WAL writes in memory, so kill -9 acts as a power cut");
}

void AddFilerHttpFlags(FlagSet& flags, filer::FilerServerOptions& o, const std::string& prefix) {
  flags.Add(prefix + "maxMB", &o.http.max_mb, "files written over HTTP are split into blobs of at most this many MiB");
  flags.Add(prefix + "dirListLimit", &o.http.list_limit, "entries an HTTP directory listing returns without ?limit=");
  flags.Add(prefix + "http.inline", &o.http.inline_small,
            "answer HTTP requests that only touch the filer's store (stat, small inline files) on the event loop");
  flags.Add(prefix + "http.workers", &o.http_workers,
            "HTTP worker threads (requests that stream bodies or call volume servers, at once)");
}

int FilerMain(int argc, char** argv) {
  BlockTerminationSignals();
  filer::FilerServerOptions opts;
  std::string log_level = "info";
  std::string security_file;
  FlagSet flags("filer", "kelp filer [flags]",
                "Runs the filer: the namespace in RocksDB (or PostgreSQL, shared by several filers: -store=postgres),\n"
                "cluster coordination (volume servers heartbeat to it, or to the coordinator among the filers\n"
                "sharing a store), a gRPC API on -port.grpc and an HTTP API on -port.");
  flags.Add("ip", &opts.ip, "address to bind");
  AddFilerFlags(flags, opts, "");
  flags.Add("logLevel", &log_level, "debug, info, warn or error");
  security::AddSecurityFlag(flags, &security_file);
  flags.ParseOrExit(argc, argv);
  InitLogging(log_level);
  if (absl::Status s = security::InstallFromFile(security_file, security::kFilerComponent); !s.ok()) {
    spdlog::error("kelp filer: {}", s);
    return 1;
  }

  filer::FilerServer server(opts);
  if (absl::Status s = server.Start(); !s.ok()) {
    spdlog::error("kelp filer: {}", s);
    return 1;
  }
  NotifyReady(
      StrCat("serving on ", opts.ip, ":", server.http_port(), " (gRPC ", server.grpc_port(), ")"));
  int sig = WaitForTerminationSignal();
  NotifyStopping();
  spdlog::info("kelp filer: signal {}, stopping", sig);
  server.Stop();
  return 0;
}

}  // namespace kelp
