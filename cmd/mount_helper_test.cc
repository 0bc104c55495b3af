#include "cmd/mount_helper.h"

#include <catch2/catch.hpp>

namespace kelp {
namespace {

std::vector<std::string> ArgsOf(const std::vector<std::string>& in, const std::string& cwd = "/") {
  absl::StatusOr<MountHelperCommand> c = ParseMountHelperArgs(in, cwd);
  REQUIRE(c.ok());
  return c->args;
}

std::string ErrorOf(const std::vector<std::string>& in) {
  absl::StatusOr<MountHelperCommand> c = ParseMountHelperArgs(in, "/");
  REQUIRE_FALSE(c.ok());
  return std::string(c.status().message());
}

}  // namespace

TEST_CASE("mount.kelp: mount(8)'s arguments become kelp mount flags, in the background") {
  CHECK(
      ArgsOf({"127.0.0.1:8888:/", "/mnt/x", "-o", "rw,chunkSizeLimitMB=4,cacheCapacityMB=1000"}) ==
      std::vector<std::string>{"-dir=/mnt/x", "-filer=127.0.0.1:8888", "-filer.path=/", "-daemon",
                               "-chunkSizeLimitMB=4", "-cacheCapacityMB=1000"});
  // An fstab line's options: mount(8)'s and systemd's own are dropped, ro/allow_other mapped.
  CHECK(ArgsOf({"localhost:9000:/data/sub", "/mnt/y", "-n", "-o",
                "defaults,_netdev,nofail,x-systemd.automount,noatime,nosuid,nodev,ro,allow_other,"
                "writebackCache"}) ==
        std::vector<std::string>{"-dir=/mnt/y", "-filer=localhost:9000", "-filer.path=/data/sub",
                                 "-daemon", "-readOnly", "-allowOthers", "-writebackCache"});
  // No path: the root. A relative mount point is made absolute.
  CHECK(ArgsOf({"filer.example:8888", "mnt", "-ochunkSizeLimitMB=8"}, "/home/u") ==
        std::vector<std::string>{"-dir=/home/u/mnt", "-filer=filer.example:8888", "-filer.path=/",
                                 "-daemon", "-chunkSizeLimitMB=8"});
}

TEST_CASE("mount.kelp: -f checks without mounting, -v shows the command") {
  absl::StatusOr<MountHelperCommand> c = ParseMountHelperArgs({"h:1:/", "/m", "-fv"}, "/");
  REQUIRE(c.ok());
  CHECK(c->fake);
  CHECK(c->verbose);
}

TEST_CASE("mount.kelp: bad sources and options are one-line errors") {
  CHECK(ErrorOf({"127.0.0.1:/", "/mnt/x"}).find("FILER_HOST:PORT") != std::string::npos);
  CHECK(ErrorOf({"127.0.0.1:99999:/", "/mnt/x"}).find("FILER_HOST:PORT") != std::string::npos);
  CHECK(ErrorOf({"/mnt/x"}).find("usage") != std::string::npos);
  CHECK(ErrorOf({"h:1", "/m", "-o"}).find("-o needs") != std::string::npos);
  CHECK(ErrorOf({"h:1", "/m", "-x"}).find("unknown option -x") != std::string::npos);
  CHECK(ErrorOf({"h:1", "/m", "-o", "filer=other:1"}).find("come from the source") !=
        std::string::npos);
}

}  // namespace kelp
