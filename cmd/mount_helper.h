// mount.kelp: the helper mount(8) runs for `mount -t kelp` and for /etc/fstab lines of type
// kelp. It turns mount(8)'s calling convention into `kelp mount` flags:
//
//   mount.kelp 127.0.0.1:8888:/sub /mnt/x [-sfnv] [-o chunkSizeLimitMB=4,ro,_netdev]
//   -> kelp mount -dir=/mnt/x -filer=127.0.0.1:8888 -filer.path=/sub -daemon
//                 -chunkSizeLimitMB=4 -readOnly
//
// The source is FILER_HOST:PORT[:/PATH]. Options mount(8) and systemd use for themselves
// (defaults, _netdev, nofail, noauto, x-systemd.*, rw, nosuid...) are dropped; ro and
// allow_other map to -readOnly and -allowOthers; every other NAME=VALUE or NAME becomes
// -NAME=VALUE or -NAME, so a misspelt option fails the mount with kelp mount's own error.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kelp {

struct MountHelperCommand {
  bool fake = false;              // -f: check the arguments, mount nothing
  bool verbose = false;           // -v
  std::vector<std::string> args;  // the arguments of `kelp mount`
};

// args: everything after the program name. cwd makes a relative mount point absolute.
absl::StatusOr<MountHelperCommand> ParseMountHelperArgs(const std::vector<std::string>& args,
                                                        const std::string& cwd);

// The process entry point when the binary is called as mount.kelp.
int MountHelperMain(int argc, char** argv);

}  // namespace kelp
