#include "cmd/mount_helper.h"

#include <string_view>

#include "shared/strings.h"

namespace kelp {
namespace {

// Options of mount(8), the kernel's generic ones FUSE applies by itself, and systemd's.
bool IsGenericOption(std::string_view o) {
  static constexpr std::string_view kDropped[] = {
      "defaults",      "_netdev",  "nofail",     "auto",     "noauto",     "user",
      "nouser",        "users",    "owner",      "group",    "rw",         "async",
      "sync",          "atime",    "noatime",    "relatime", "norelatime", "strictatime",
      "nostrictatime", "diratime", "nodiratime", "dev",      "nodev",      "suid",
      "nosuid",        "exec",     "noexec",     "lazytime", "nolazytime", "silent",
      "loud",          "bg",       "fg"};
  for (std::string_view d : kDropped) {
    if (o == d) return true;
  }
  return o.rfind("x-", 0) == 0 || o.rfind("comment=", 0) == 0;
}

}  // namespace

absl::StatusOr<MountHelperCommand> ParseMountHelperArgs(const std::vector<std::string>& args,
                                                        const std::string& cwd) {
  MountHelperCommand cmd;
  std::vector<std::string> positional;
  std::vector<std::string_view> options;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "-o") {
      if (i + 1 == args.size()) return absl::InvalidArgumentError("-o needs a list of options");
      for (std::string_view o : SplitSkipEmpty(args[++i], ',')) options.push_back(o);
    } else if (a.rfind("-o", 0) == 0 && a.size() > 2) {
      for (std::string_view o : SplitSkipEmpty(a.substr(2), ',')) options.push_back(o);
    } else if (a == "-t" || a == "-N") {
      ++i;  // the type (kelp) and a namespace: nothing to do with them
    } else if (a.size() > 1 && a[0] == '-') {
      for (char c : a.substr(1)) {
        switch (c) {
          case 'f':
            cmd.fake = true;
            break;
          case 'v':
            cmd.verbose = true;
            break;
          case 's':
          case 'n':
            break;  // sloppy, no mtab: nothing to do
          default:
            return absl::InvalidArgumentError(kelp::StrCat("unknown option -", std::string(1, c)));
        }
      }
    } else {
      positional.emplace_back(a);
    }
  }
  if (positional.size() != 2) {
    return absl::InvalidArgumentError(
        "usage: mount.kelp FILER_HOST:PORT[:/PATH] MOUNTPOINT [-o option,...]");
  }
  // FILER_HOST:PORT[:/PATH]: the path starts at the first ":/".
  std::string source = positional[0];
  std::string filer = source, filer_path = "/";
  if (size_t p = source.find(":/"); p != std::string::npos) {
    filer = source.substr(0, p);
    filer_path = source.substr(p + 1);
  }
  size_t colon = filer.rfind(':');
  uint32_t port = 0;
  if (filer.empty() || colon == std::string::npos || colon == 0 ||
      !kelp::ParseInt(std::string_view(filer).substr(colon + 1), &port) || port == 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(kelp::StrCat(
        "source \"", source, "\": want FILER_HOST:PORT[:/PATH], e.g. 127.0.0.1:8888:/"));
  }
  std::string dir = positional[1];
  if (dir.empty()) return absl::InvalidArgumentError("empty mount point");
  if (dir[0] != '/') dir = kelp::StrCat(cwd, cwd.size() > 0 && cwd.back() == '/' ? "" : "/", dir);

  cmd.args = {kelp::StrCat("-dir=", dir), kelp::StrCat("-filer=", filer),
              kelp::StrCat("-filer.path=", filer_path), "-daemon"};
  for (std::string_view o : options) {
    if (IsGenericOption(o)) continue;
    if (o == "ro") {
      cmd.args.push_back("-readOnly");
    } else if (o == "allow_other") {
      cmd.args.push_back("-allowOthers");
    } else if (o == "daemon" || o.rfind("daemon=", 0) == 0 || o.rfind("dir=", 0) == 0 ||
               o.rfind("filer=", 0) == 0 || o.rfind("filer.path=", 0) == 0) {
      return absl::InvalidArgumentError(kelp::StrCat(
          "option ", o,
          ": the filer, its path and the mount point come from the source and target"));
    } else {
      cmd.args.push_back(kelp::StrCat("-", o));
    }
  }
  return cmd;
}

}  // namespace kelp
