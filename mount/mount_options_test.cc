#include "mount/mount_options.h"

#include <stdlib.h>
#include <unistd.h>

#include <string_view>

#include <catch2/catch.hpp>

namespace kelp::mount {

TEST_CASE("default cache dir: one per filer, filer path and mount point, stable across remounts") {
  const char* old_tmp = std::getenv("TMPDIR");
  std::string saved = old_tmp ? old_tmp : "";
  setenv("TMPDIR", "/var/tmp/", 1);
  MountOptions a;
  a.dir = "/nonexistent/kelp-a";
  a.filer = "127.0.0.1:8888";
  std::string da = DefaultCacheDir(a);
  CHECK(da.rfind("/var/tmp/kelp-cache-", 0) == 0);
  CHECK(da.size() == std::string("/var/tmp/kelp-cache-").size() + 16);
  CHECK(DefaultCacheDir(a) == da);  // a remount finds its cache again

  MountOptions b = a;
  b.dir = "/nonexistent/kelp-b";
  CHECK(DefaultCacheDir(b) != da);  // a second mount gets its own
  MountOptions c = a;
  c.filer = "127.0.0.1:9999";
  CHECK(DefaultCacheDir(c) != da);
  MountOptions d = a;
  d.filer_path = "/sub";
  CHECK(DefaultCacheDir(d) != da);
  MountOptions e = d;
  e.filer_path = "/sub/";
  CHECK(DefaultCacheDir(e) == DefaultCacheDir(d));  // the same subtree, however it is typed

  unsetenv("TMPDIR");
  CHECK(DefaultCacheDir(a).rfind("/tmp/kelp-cache-", 0) == 0);
  if (old_tmp) setenv("TMPDIR", saved.c_str(), 1);
}


TEST_CASE("flag values out of range are clear errors naming the flag") {
  char tmpl[] = "/tmp/kelp-flags-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  MountOptions o;
  o.dir = tmpl;
  REQUIRE(ValidateMountOptions(o).ok());
  // Whether the options are refused with an error that names flag.
  auto refused = [&o](std::string_view flag) {
    absl::Status s = ValidateMountOptions(o);
    return s.code() == absl::StatusCode::kInvalidArgument &&
           std::string(s.message()).find(flag) != std::string::npos;
  };
  o.unlink_behind = 65537;
  CHECK(refused("-unlinkBehind"));
  o.unlink_behind = 0;  // off
  CHECK(ValidateMountOptions(o).ok());
  o.concurrent_writers = 0;
  CHECK(refused("-concurrentWriters"));
  o.concurrent_writers = 8;
  o.journal_memory_mb = 0;
  CHECK(refused("-journalMemoryMB"));
  o.journal_memory_mb = 64;
  CHECK(ValidateMountOptions(o).ok());
  for (int bad : {-1, 10001}) {
    o.fuse_busy_poll_us = bad;
    CHECK(refused("-fuseBusyPollMicros"));
  }
  o.fuse_busy_poll_us = 0;  // off
  CHECK(ValidateMountOptions(o).ok());
  for (int bad : {-5, 20000}) {
    o.rpc_reply_poll_us = bad;
    CHECK(refused("-rpcReplyPollMicros"));
  }
  o.rpc_reply_poll_us = 0;  // off
  CHECK(ValidateMountOptions(o).ok());
  rmdir(tmpl);
}

}  // namespace kelp::mount
