#include <cstdio>

#include "cmd/commands.h"
#include "shared/version.h"

namespace kelp {

int VersionMain(int, char**) {
  std::printf("kelp %s (C++20, %s)\n", kVersion, __VERSION__);
  return 0;
}

}  // namespace kelp
