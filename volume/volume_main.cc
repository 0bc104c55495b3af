// kelp volume: flags -> VolumeServer -> wait for a signal -> Stop.
#include <cstdio>

#include "cmd/commands.h"
#include "shared/daemon.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/signals.h"
#include "shared/strings.h"
#include "volume/server/volume_server.h"

namespace kelp {

int VolumeMain(int argc, char** argv) {
  BlockTerminationSignals();
  volume::VolumeServer::Options o;
  std::string index = "memory";
  std::string log_level = "info";
  std::string security_file;
  FlagSet flags(
      "volume", "kelp volume -dir=DIR [flags]",
      "Runs a volume server: blobs in append-only volumes, HTTP data plane, gRPC control plane,\n"
      "heartbeats to the filer.");
  flags.Add("dir", &o.dir, "directory of the volume files (created if missing)");
  flags.Add("ip", &o.ip, "address to listen on and advertise");
  flags.Add("port", &o.port, "HTTP port (data plane)");
  flags.Add("port.grpc", &o.grpc_port, "gRPC port (control plane); 0 = port + 10000");
  flags.Add("publicUrl", &o.public_url,
            "host:port clients use to reach this server; empty = ip:port");
  flags.Add("max", &o.max_volumes, "maximum number of volumes on this server");
  flags.Add("volumeSizeLimitMB", &o.volume_size_limit_mb,
            "a volume at or over this size turns read-only, in MiB (the filer may lower it)");
  flags.Add("fileSizeLimitMB", &o.file_size_limit_mb,
            "largest blob accepted, in MiB; larger uploads get 413");
  flags.Add("concurrentUploadLimitMB", &o.concurrent_upload_limit_mb,
            "upload bodies held in memory at once, in MiB; further uploads wait, then get 503");
  flags.Add("filer", &o.filer,
            "the filer's HTTP host:port (its gRPC port is port + 10000), or several filers sharing one store, "
            "comma-separated (heartbeats go to their coordinator); empty = standalone");
  flags.Alias("master", "filer");
  flags.Alias("mserver", "filer");
  flags.Add("dataCenter", &o.data_center, "data center of this server, for replica placement");
  flags.Add("rack", &o.rack, "rack of this server, for replica placement");
  flags.Add("garbageThreshold", &o.garbage_threshold,
            "vacuum a volume when garbage reaches this fraction of it");
  flags.Add("vacuumIntervalSec", &o.vacuum_interval_sec,
            "how often the background vacuum looks for volumes over the threshold, in seconds; 0 = "
            "never");
  flags.Add("pulseMs", &o.pulse_ms, "heartbeat period in ms, until the filer asks for another");
  flags.Add("http.loops", &o.http_loop_threads, "HTTP event-loop threads; 0 = one per core");
  flags.Add("http.workers", &o.http_worker_threads,
            "HTTP worker threads for large, fsync and replicated requests");
  flags.Add("index", &index, "needle index kind; only \"memory\" (a compact in-memory map) exists");
  flags.Add("testing.powerCut", &o.testing_power_cut,
            "testing only: keep unsynced volume writes in memory, so kill -9 acts as a power cut");
  flags.Add("logLevel", &log_level, "debug, info, warn or error");
  security::AddSecurityFlag(flags, &security_file);
  flags.ParseOrExit(argc, argv);
  if (index != "memory") {
    std::fprintf(stderr, "kelp volume: -index=%s is not supported (only \"memory\")\n",
                 index.c_str());
    return 2;
  }
  if (!flags.args().empty()) {
    std::fprintf(stderr, "kelp volume: unexpected argument \"%s\" (see 'kelp volume -h')\n",
                 flags.args()[0].c_str());
    return 2;
  }
  InitLogging(log_level);
  if (absl::Status s = security::InstallFromFile(security_file, security::kVolumeComponent); !s.ok()) {
    spdlog::error("kelp volume: {}", s);
    return 1;
  }

  volume::VolumeServer server(o);
  if (absl::Status s = server.Start(); !s.ok()) {
    spdlog::error("kelp volume: {}", s);
    return 1;
  }
  NotifyReady(StrCat("serving on ", server.url()));
  int sig = WaitForTerminationSignal();
  NotifyStopping();
  spdlog::info("kelp volume: signal {}, stopping", sig);
  server.Stop();
  return 0;
}

}  // namespace kelp
