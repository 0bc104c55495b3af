// kelp filer.fsck: parse flags, run the check (filer/fsck/fsck.h), exit with its code.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cmd/commands.h"
#include "filer/fsck/fsck.h"
#include "shared/flags.h"
#include "shared/log.h"

namespace kelp {
namespace {

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

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
  o.volume_servers = SplitList(volumes);
  InitLogging("warn");
  return filer::RunFsck(o, [](std::string_view line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  });
}

}  // namespace kelp
