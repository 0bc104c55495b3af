// kelp: one binary, subcommands as `weed` has them. Each subcommand lives with its service
// and takes the arguments after its name.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "cmd/commands.h"
#include "cmd/mount_helper.h"
#include "shared/daemon.h"

namespace {

struct Command {
  const char* name;
  int (*main)(int argc, char** argv);
  const char* summary;
};

const Command kCommands[] = {
    {"server", kelp::ServerMain, "filer + one volume server in one process (the embedded default)"},
    {"filer", kelp::FilerMain, "the namespace (RocksDB or PostgreSQL), cluster coordination and HTTP/gRPC APIs"},
    {"volume", kelp::VolumeMain, "a volume server storing blobs in append-only volumes"},
    {"mount", kelp::MountMain, "mount the filesystem with FUSE"},
    {"benchmark", kelp::BenchmarkMain, "write then read n blobs against a cluster, weed-style"},
    {"filer.fsck", kelp::FsckMain, "check (and with -fix repair) the filer's metadata"},
    {"filer.copy", kelp::CopyMain, "copy a namespace between stores (RocksDB <-> PostgreSQL)"},
    {"security.token", kelp::SecurityTokenMain, "print a token for the filer's HTTP API (docs/security.md)"},
    {"version", kelp::VersionMain, "print the version"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "Kelp: a distributed filesystem.\n\nUsage: kelp <command> [flags]\n\nCommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
  std::fprintf(out, "\nRun 'kelp <command> -h' for the flags of a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's abseil is built with Mutex deadlock detection on: every lock of an absl::Mutex
  // (gRPC takes several per call) updated a global lock graph, a few % of the CPU of each RPC.
  // TSan and the lock annotations are how this project finds lock-order bugs.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  kelp::SetUpProcess();
  // mount(8) runs /sbin/mount.kelp (a link to this binary) for `mount -t kelp` and fstab.
  std::string_view prog = argv[0];
  if (size_t slash = prog.rfind('/'); slash != std::string_view::npos)
    prog.remove_prefix(slash + 1);
  if (prog == "mount.kelp") return kelp::MountHelperMain(argc, argv);
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string_view name = argv[1];
  if (name == "-h" || name == "-help" || name == "--help" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "-version" || name == "--version") name = "version";
  for (const auto& c : kCommands) {
    if (name == c.name) return c.main(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "kelp: unknown command \"%s\" (see 'kelp -h')\n", argv[1]);
  return 2;
}
