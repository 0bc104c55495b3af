// kelp filer.fsck: parse flags, run the check (filer/fsck/fsck.h), exit with its code.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cmd/commands.h"
#include "filer/fsck/fsck.h"
#include "shared/flags.h"
#include "shared/log.h"
#include "shared/security/security.h"
#include "shared/strings.h"

namespace kelp {

int FsckMain(int argc, char** argv) {
  filer::FsckOptions o;
  o.dir = "./filerdata";
  std::string volumes;
  FlagSet flags("filer.fsck", "kelp filer.fsck -dir=DIR | -store=postgres -store.dsn=DSN [-fix] [-volumes=host:port,...] [-v]",
                "Checks the metadata of a stopped filer (every filer of a shared store stopped): dentries,\n"
                "inodes and nlink, the readdir index,\n"
                "orphans, chunk records, the GC queue, the event log and the sequences; with -volumes also\n"
                "that every chunk's blob is on a volume server and that no blob there is leaked (held but\n"
                "neither referenced nor queued for GC). -fix repairs what is safe (unreachable inodes go to\n"
                "/lost+found, leaked blobs are queued for GC). One line per problem, then a summary.\n"
                "Exit code: 0 clean (with -fix: nothing left), 1 problems (or the check could not run), 2 usage.\n"
                "See docs/fsck.md.");
  flags.Add("dir", &o.dir,
            "the filer's data directory (kelp filer -dir; a kelp server -dir or the RocksDB directory also work)");
  filer::AddStoreFlags(flags, o.store, "");
  flags.Add("fix", &o.fix, "repair what is safe to repair");
  flags.Add("volumes", &volumes,
            "volume servers to check chunk blobs against, comma-separated host:port (HTTP port; gRPC is "
            "port+10000, or say host:port.grpcPort)");
  flags.Add("v", &o.verbose, "verbose: progress lines too");
  std::string security_file;
  security::AddSecurityFlag(flags, &security_file);
  flags.ParseOrExit(argc, argv);
  if (!flags.args().empty()) {
    std::fprintf(stderr, "kelp filer.fsck: unexpected argument \"%s\" (see 'kelp filer.fsck -h')\n",
                 flags.args()[0].c_str());
    return filer::kFsckUsage;
  }
  if (o.dir.empty()) {
    std::fprintf(stderr, "kelp filer.fsck: -dir is required (see 'kelp filer.fsck -h')\n");
    return filer::kFsckUsage;
  }
  for (std::string_view v : SplitSkipEmpty(volumes, ',')) o.volume_servers.emplace_back(v);
  // Progress on stderr, so stdout keeps only problems and the summary.
  o.progress = [](std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  };
  InitLogging("warn");
  if (absl::Status s = security::InstallFromFile(security_file, security::kClientComponent); !s.ok()) {
    std::fprintf(stderr, "kelp filer.fsck: %s\n", std::string(s.message()).c_str());
    return filer::kFsckUsage;
  }
  return filer::RunFsck(o, [](std::string_view line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  });
}

}  // namespace kelp
