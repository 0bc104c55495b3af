// kelp_fake_mount DIR: mounts an in-memory filer (the real namespace core on the memory store,
// in this process) and an in-memory blob store at DIR, for testing the FUSE layer without
// servers. Runs until SIGINT/SIGTERM or an unmount; the data dies with it.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string_view>

#include "mount/core/filesystem.h"
#include "mount/fuse/fuse_server.h"
#include "mount/testing/fake_blob_store.h"
#include "mount/testing/test_filer.h"
#include "shared/log.h"
#include "shared/signals.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kelp_fake_mount DIR [debug] [nouring]\n");
    return 2;
  }
  kelp::BlockTerminationSignals();
  bool debug = false, uring = true;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "debug") {
      debug = true;
    } else if (a == "nouring") {
      uring = false;  // /dev/fuse alone
    } else {
      std::fprintf(stderr, "kelp_fake_mount: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  kelp::InitLogging(debug ? "debug" : "info");
  kelp::mount::TestFiler filer;
  kelp::mount::FakeBlobStore blobs;
  kelp::mount::FsOptions fo;
  fo.chunk_size = 1 << 20;
  fo.write_buffer = 8 << 20;
  kelp::mount::Filesystem fs(filer.client(), &blobs, nullptr, fo);
  if (auto s = fs.Start(); !s.ok()) {
    spdlog::error("{}", s);
    return 1;
  }
  kelp::mount::fuse::FuseOptions uo;
  uo.mountpoint = argv[1];
  uo.debug = debug;
  uo.uring = uring;
  uo.allow_others = true;
  kelp::mount::fuse::FuseServer server(&fs, uo);
  if (auto s = server.Mount(); !s.ok()) {
    spdlog::error("{}", s);
    return 1;
  }
  server.Start([] { kill(getpid(), SIGTERM); });
  fs.StartEvents(&server);
  kelp::WaitForTerminationSignal();
  fs.FlushAll().IgnoreError();
  server.Unmount();
  fs.Stop();
  return 0;
}
