#include "mount/fuse/fuse_server.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mount/fuse/device_loop.h"
#include "shared/log.h"
#include "shared/strings.h"

namespace kelp::mount::fuse {

namespace {

// The FUSE connection number of the mount at path (the minor of its device), read from
// /proc/self/mountinfo: a stat() of the mount point would ask this very filesystem, whose loop
// is not running yet.
int ConnectionId(const std::string& path) {
  char real[PATH_MAX];
  std::string want = realpath(path.c_str(), real) ? real : path;
  FILE* f = std::fopen("/proc/self/mountinfo", "r");
  if (f == nullptr) return -1;
  int id = -1;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    unsigned major = 0, minor_no = 0;
    char mnt[PATH_MAX];
    if (std::sscanf(line, "%*d %*d %u:%u %*s %4095s", &major, &minor_no, mnt) == 3 && want == mnt) {
      id = static_cast<int>(minor_no);  // the last match is the newest mount there
    }
  }
  std::fclose(f);
  return id;
}

// FUSE over io_uring is off in the kernel unless the fuse module's enable_uring parameter is
// set (it is read when a connection starts). The mount sets it when it runs as root: it lets
// filesystems that ask for the ring have it, and changes nothing for those that do not.
void EnableKernelUring() {
  const char* path = "/sys/module/fuse/parameters/enable_uring";
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return;  // a kernel without it (before 6.14)
  int c = std::fgetc(f);
  std::fclose(f);
  if (c == 'Y' || c == '1') return;
  f = std::fopen(path, "w");
  bool set = f != nullptr;
  if (f != nullptr) {
    set = std::fputs("Y", f) >= 0;
    set = std::fclose(f) == 0 && set;  // the kernel answers the write at the flush
  }
  if (!set) {
    spdlog::info(
        "FUSE over io_uring is off in the kernel ({} is N, and only root may set it): /dev/fuse "
        "alone",
        path);
    return;
  }
  spdlog::info("turned on FUSE over io_uring in the kernel ({}=Y)", path);
}

void AbortConnection(int id) {
  std::string dir = "/sys/fs/fuse/connections";
  std::string path = kelp::StrCat(dir, "/", id, "/abort");
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    ::mount("fusectl", dir.c_str(), "fusectl", 0, nullptr);  // not mounted on this machine yet
    f = std::fopen(path.c_str(), "w");
  }
  if (f == nullptr) return;
  std::fputs("1", f);
  std::fclose(f);
  spdlog::warn("aborted the FUSE connection: files were still open on the mount");
}

// The session's device: requests read with libfuse's buffers (and the raw_io hook).
class SessionDevice final : public RequestDevice {
 public:
  explicit SessionDevice(fuse_session* se) : se_(se) {}

  std::unique_ptr<Reader> NewReader() override { return std::make_unique<SessionReader>(se_); }

  bool Pending() override {
    pollfd p{fuse_session_fd(se_), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
  }
  int Fd() const override { return fuse_session_fd(se_); }

 private:
  class SessionReader final : public Reader {
   public:
    explicit SessionReader(fuse_session* se) : se_(se) {}
    ~SessionReader() override { std::free(buf_.mem); }
    SessionReader(const SessionReader&) = delete;
    SessionReader& operator=(const SessionReader&) = delete;

    int Read() override {
      int n = fuse_session_receive_buf(se_, &buf_);
      return fuse_session_exited(se_) ? 0 : n;  // 0 also when the kernel ended the connection
    }
    bool Busy() const override {
      fuse_in_header h;
      if (buf_.mem == nullptr || buf_.size < sizeof h) return false;
      std::memcpy(&h, buf_.mem, sizeof h);
      switch (h.opcode) {
        case FUSE_READ:
        case FUSE_WRITE:
        case FUSE_READDIR:
        case FUSE_READDIRPLUS:
        case FUSE_COPY_FILE_RANGE:
          return true;
        default:
          return false;
      }
    }
    void Run() override { fuse_session_process_buf(se_, &buf_); }
    // The release of a file opened read-only: the kernel sends it after close() returned, and
    // it has nothing to flush (Filesystem::Release then only counts the handle gone).
    bool Deferrable() const override {
      if ((buf_.flags & FUSE_BUF_IS_FD) || buf_.mem == nullptr) return false;
      fuse_in_header h;
      fuse_release_in in;
      if (buf_.size < sizeof h + sizeof in) return false;
      std::memcpy(&h, buf_.mem, sizeof h);
      if (h.opcode != FUSE_RELEASE) return false;
      std::memcpy(&in, static_cast<const char*>(buf_.mem) + sizeof h, sizeof in);
      return (in.flags & O_ACCMODE) == O_RDONLY;
    }
    std::function<void()> TakeDeferred() override {
      auto copy = std::make_shared<std::string>(static_cast<const char*>(buf_.mem), buf_.size);
      return [se = se_, copy] {
        fuse_buf b{};
        b.size = copy->size();
        b.mem = copy->data();
        fuse_session_process_buf(se, &b);
      };
    }

   private:
    fuse_session* const se_;
    fuse_buf buf_{};
  };

  fuse_session* const se_;
};

}  // namespace

FuseServer::FuseServer(Filesystem* fs, FuseOptions options) : fs_(fs), opts_(std::move(options)) {
  ctx_.fs = fs_;
  ctx_.attr_timeout = opts_.attr_timeout;
  ctx_.entry_timeout = opts_.entry_timeout;
  ctx_.root = fs_->root();
  ctx_.debug = opts_.debug;
  ctx_.writeback_cache = opts_.writeback_cache;
  ctx_.raw.want_killpriv_v2 = opts_.kill_priv_v2;
  ctx_.raw.want_uring = opts_.uring;
  ctx_.raw.prepare_uring = [this](uint32_t max_write, uint32_t max_pages) {
    return PrepareUring(max_write, max_pages);
  };
  ctx_.raw.start_uring = [this](bool taken) { StartUring(taken); };
}

FuseServer::~FuseServer() {
  Unmount();
  if (se_ != nullptr) fuse_session_destroy(se_);
}

absl::Status FuseServer::Mount() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof ops);
  AddEntryOps(&ops);
  AddFileOps(&ops);
  AddDirOps(&ops);
  AddMiscOps(&ops);

  // fuse_opt splits options at commas: escape them (a -filer list has some) and backslashes.
  std::string fsname;
  for (char c : opts_.fsname) {
    if (c == ',' || c == '\\') fsname += '\\';
    fsname += c;
  }
  std::string mount_opts = kelp::StrCat("default_permissions,fsname=", fsname, ",subtype=kelp");
  if (opts_.allow_others) mount_opts += ",allow_other";
  if (opts_.read_only) mount_opts += ",ro";
  std::vector<std::string> args = {"kelp", "-o", mount_opts};
  if (opts_.debug) args.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  if (opts_.uring) EnableKernelUring();
  se_ = fuse_session_new(&fargs, &ops, sizeof ops, &ctx_);
  fuse_opt_free_args(&fargs);
  if (se_ == nullptr) return absl::InternalError("cannot create the FUSE session (see the message above)");
  if (fuse_session_mount(se_, opts_.mountpoint.c_str()) != 0) {
    return absl::UnavailableError(kelp::StrCat("cannot mount on ", opts_.mountpoint,
                                               " (is /dev/fuse there, and are you root or in group fuse?)"));
  }
  mounted_ = true;
  conn_id_ = ConnectionId(opts_.mountpoint);
  if (absl::Status s = InstallRawIo(se_); !s.ok()) return s;
  ctx_.se = se_;
  return absl::OkStatus();
}

void FuseServer::Start(std::function<void()> on_exit) {
  running_ = true;
  loop_ = std::thread([this, on_exit = std::move(on_exit)] {
    SessionDevice device(se_);
    DeviceLoop loop(&device, opts_.max_threads, opts_.busy_poll,
                    [fs = fs_] { return fs->BackgroundBusy(); });
    int rc = loop.Run();
    if (rc != 0) spdlog::info("FUSE loop ended: {}", strerror(-rc));
    StopUring();  // the connection ended: nothing comes over the ring any more
    running_ = false;
    if (on_exit) on_exit();
  });
}

void FuseServer::Unmount() {
  if (se_ == nullptr) return;
  if (running_) fuse_session_exit(se_);
  if (mounted_) {
    // Closes the device (which ends the loop's reads) and detaches the mount.
    fuse_session_unmount(se_);
    mounted_ = false;
  }
  // A lazily detached mount that some process still uses keeps the connection (and the loop's
  // reads) alive: abort the connection if the loop does not end soon.
  for (int i = 0; i < 30 && running_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (running_ && conn_id_ >= 0) AbortConnection(conn_id_);
  if (loop_.joinable()) loop_.join();
}

bool FuseServer::PrepareUring(uint32_t max_write, uint32_t max_pages) {
  UringLoop::Options o;
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  // At least two a CPU: the kernel never moves a request to another CPU's queue, so one
  // request that waits would hold every request made on its CPU.
  o.threads_per_queue = std::max(2, opts_.max_threads / std::max(1, cpus));
  o.payload_size = std::max<size_t>(
      {size_t{8192}, max_write,
       static_cast<size_t>(max_pages) * static_cast<size_t>(sysconf(_SC_PAGESIZE))});
  absl::StatusOr<std::unique_ptr<UringLoop>> loop =
      UringLoop::Prepare(se_, fuse_session_fd(se_), o);
  if (!loop.ok()) {
    spdlog::warn("FUSE requests stay on /dev/fuse: {}", loop.status().message());
    return false;
  }
  MutexLock lock(uring_mu_);
  uring_ = *std::move(loop);
  uring_threads_ = o.threads_per_queue;
  return true;
}

void FuseServer::StartUring(bool taken) {
  {
    MutexLock lock(uring_mu_);
    if (!uring_) return;
    uring_->Go(taken);
    if (taken) {
      spdlog::info("FUSE requests over io_uring: {} threads a CPU", uring_threads_);
      return;
    }
  }
  StopUring();
}

void FuseServer::StopUring() {
  std::unique_ptr<UringLoop> loop;
  {
    MutexLock lock(uring_mu_);
    loop = std::move(uring_);
  }
  if (loop) loop->Stop();
}

void FuseServer::InvalidateInode(uint64_t ino, bool data) {
  if (se_ == nullptr || !running_) return;
  int rc = fuse_lowlevel_notify_inval_inode(se_, ctx_.ToFuse(ino), data ? 0 : -1, 0);
  if (rc != 0 && rc != -ENOENT && opts_.debug) spdlog::debug("inval inode {}: {}", ino, strerror(-rc));
}

void FuseServer::InvalidateEntry(uint64_t parent, std::string_view name) {
  if (se_ == nullptr || !running_) return;
  std::string n(name);
  int rc = fuse_lowlevel_notify_inval_entry(se_, ctx_.ToFuse(parent), n.c_str(), n.size());
  if (rc != 0 && rc != -ENOENT && opts_.debug) spdlog::debug("inval entry {}/{}: {}", parent, n, strerror(-rc));
}

}  // namespace kelp::mount::fuse
