// kelp_fake_mount DIR [debug] [nouring] [denyiouring]: mounts an in-memory filer (the real
// namespace core on the memory store, in this process) and an in-memory blob store at DIR, for
// testing the FUSE layer without servers. Runs until SIGINT/SIGTERM or an unmount; the data
// dies with it. nouring: /dev/fuse alone. denyiouring: the process may not set up an io_uring
// (a seccomp filter answers io_uring_setup EPERM, as container runtimes' default profiles do),
// so the mount that wants the ring must stay on /dev/fuse.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "mount/core/filesystem.h"
#include "mount/fuse/fuse_server.h"
#include "mount/testing/fake_blob_store.h"
#include "mount/testing/test_filer.h"
#include "shared/log.h"
#include "shared/signals.h"

namespace {

// The build's own architecture: a filter is matched against the calling convention it names.
#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "kelp_fake_mount: no seccomp architecture for this build"
#endif

bool DenyIoUringSetup() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kelp_fake_mount DIR [debug] [nouring] [denyiouring]\n");
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
    } else if (a == "denyiouring") {
      if (!DenyIoUringSetup()) {
        std::perror("kelp_fake_mount: seccomp");
        return 1;
      }
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
