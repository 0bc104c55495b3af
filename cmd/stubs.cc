// Subcommands whose service has not landed yet. Each service replaces its line here with
// its real entry point as it lands.
#include <cstdio>

#include "cmd/commands.h"

namespace kelp {
namespace {
int NotYet(const char* what) {
  std::fprintf(stderr, "kelp %s: not built yet\n", what);
  return 1;
}
}  // namespace

int ServerMain(int, char**) { return NotYet("server"); }
int FilerMain(int, char**) { return NotYet("filer"); }
int FsckMain(int, char**) { return NotYet("filer.fsck"); }
int MountMain(int, char**) { return NotYet("mount"); }
int BenchmarkMain(int, char**) { return NotYet("benchmark"); }

}  // namespace kelp
