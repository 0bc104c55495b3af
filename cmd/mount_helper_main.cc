// mount.kelp: mount(8)'s helper for type kelp; parses its arguments and runs `kelp mount`
// in the background (it returns once the mount is live).
#include <unistd.h>

#include <cstdio>

#include "cmd/commands.h"
#include "cmd/mount_helper.h"

namespace kelp {

int MountHelperMain(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  char cwd[4096];
  std::string dir = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/";
  absl::StatusOr<MountHelperCommand> cmd = ParseMountHelperArgs(args, dir);
  if (!cmd.ok()) {
    std::fprintf(stderr, "mount.kelp: %s\n", std::string(cmd.status().message()).c_str());
    return 1;  // mount(8): "incorrect invocation"
  }
  if (cmd->verbose || cmd->fake) {
    std::fprintf(stderr, "mount.kelp: kelp mount");
    for (const std::string& a : cmd->args) std::fprintf(stderr, " %s", a.c_str());
    std::fprintf(stderr, "\n");
  }
  if (cmd->fake) return 0;
  // The daemon must not keep the caller's working directory busy.
  if (chdir("/") != 0) std::perror("mount.kelp: chdir /");
  std::vector<char*> margv;
  for (std::string& a : cmd->args) margv.push_back(a.data());
  margv.push_back(nullptr);
  return MountMain(static_cast<int>(cmd->args.size()), margv.data());
}

}  // namespace kelp
