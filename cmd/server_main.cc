// kelp server: the embedded default. A filer and one volume server in one process, data
// under one directory (<dir>/filer, <dir>/volume).
#include <filesystem>

#include "cmd/commands.h"
#include "filer/filer_main.h"
#include "filer/server/filer_server.h"
#include "filer/store/open_store.h"
#include "shared/daemon.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/signals.h"
#include "shared/strings.h"
#include "volume/server/volume_server.h"

namespace kelp {

int ServerMain(int argc, char** argv) {
  BlockTerminationSignals();
  std::string dir = "./kelpdata";
  std::string ip = "127.0.0.1";
  std::string log_level = "info";
  std::string security_file;
  filer::FilerServerOptions f;
  volume::VolumeServer::Options v;
  v.port = 8080;
  FlagSet flags("server", "kelp server [flags]",
                "Runs a filer and one volume server in one process: the embedded default.\n"
                "Data lives under -dir (<dir>/filer and <dir>/volume).");
  flags.Add("dir", &dir, "data directory for both servers");
  flags.Add("ip", &ip, "address to bind and advertise");
  filer::AddStoreFlags(flags, f.store, "");
  flags.Add("filer.port", &f.port, "filer HTTP port");
  flags.Add("filer.port.grpc", &f.grpc_port, "filer gRPC port (0 = filer.port + 10000)");
  flags.Add("filer.defaultReplication", &f.default_replication, "replication \"xyz\" for writes that name none");
  AddFilerHttpFlags(flags, f, "filer.");
  flags.Add("volume.port", &v.port, "volume server HTTP port");
  flags.Add("volume.port.grpc", &v.grpc_port, "volume server gRPC port (0 = volume.port + 10000)");
  flags.Add("volume.max", &v.max_volumes, "most volumes the volume server holds");
  flags.Add("volume.fileSizeLimitMB", &v.file_size_limit_mb, "largest blob accepted, in MiB");
  flags.Add("volumeSizeLimitMB", &f.volume_size_limit_mb, "a volume at or over this size takes no writes, in MiB");
  bool power_cut = false;
  flags.Add("testing.powerCut", &power_cut,
            "testing only: both servers keep unsynced writes in memory, so kill -9 acts as a power cut");
  flags.Add("logLevel", &log_level, "debug, info, warn or error");
  security::AddSecurityFlag(flags, &security_file);
  flags.ParseOrExit(argc, argv);
  InitLogging(log_level);
  // Both servers serve with their own [grpc.filer] / [grpc.volume]; the process dials with the filer's.
  if (absl::Status s = security::InstallFromFile(security_file, security::kFilerComponent); !s.ok()) {
    spdlog::error("kelp server: {}", s);
    return 1;
  }

  f.dir = (std::filesystem::path(dir) / "filer").string();
  f.ip = ip;
  v.dir = (std::filesystem::path(dir) / "volume").string();
  v.ip = ip;
  v.volume_size_limit_mb = f.volume_size_limit_mb;
  f.testing_power_cut = v.testing_power_cut = power_cut;

  filer::FilerServer filer_server(f);
  if (absl::Status s = filer_server.Start(); !s.ok()) {
    spdlog::error("kelp server: filer: {}", s);
    return 1;
  }
  v.filer = StrCat(ip, ":", filer_server.http_port());
  v.filer_grpc_port = filer_server.grpc_port();
  volume::VolumeServer volume_server(v);
  if (absl::Status s = volume_server.Start(); !s.ok()) {
    spdlog::error("kelp server: volume: {}", s);
    filer_server.Stop();
    return 1;
  }
  NotifyReady(StrCat("filer on ", f.ip, ":", filer_server.http_port(), ", volume server on ",
                     volume_server.url()));
  int sig = WaitForTerminationSignal();
  NotifyStopping();
  spdlog::info("kelp server: signal {}, stopping", sig);
  volume_server.Stop();
  filer_server.Stop();
  return 0;
}

}  // namespace kelp
