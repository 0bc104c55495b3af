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

int FsckMain(int, char**) { return NotYet("filer.fsck"); }

}  // namespace kelp
