#include "shared/daemon.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp {
namespace {

// Set by Daemonize in the child: the write end of the pipe its parent waits on, and where to
// log once ready.
int g_ready_fd = -1;
std::string g_log_file;
bool g_ready_sent = false;
// Until ready, a daemon's caller (mount(8)) shows only warnings and errors.
std::optional<spdlog::level::level_enum> g_level_before;

// The parent of Daemonize: waits for one byte (ready) or EOF (the child ended first).
[[noreturn]] void WaitForChild(pid_t child, int read_fd) {
  char c = 0;
  ssize_t n;
  do {
    n = read(read_fd, &c, 1);
  } while (n < 0 && errno == EINTR);
  if (n == 1) _exit(0);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1);
  if (WIFSIGNALED(status)) _exit(128 + WTERMSIG(status));
  _exit(1);
}

// Moves stdin to /dev/null and stdout/stderr to the log file (or /dev/null, or leaves them on
// the journal), so nobody reading the starting process's output waits for the daemon to end.
void RedirectStdio() {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  int out_fd = -1;
  if (!g_log_file.empty()) {
    out_fd = open(g_log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (out_fd < 0) {
      std::fprintf(stderr, "kelp: cannot open -logFile %s: %s; logging to /dev/null\n",
                   g_log_file.c_str(), strerror(errno));
    }
  } else if (std::getenv("JOURNAL_STREAM") != nullptr) {
    if (null_fd >= 0) close(null_fd);
    return;  // systemd's journal: nobody waits on it for EOF
  }
  int fd = out_fd >= 0 ? out_fd : null_fd;
  if (fd >= 0) {
    std::fflush(stdout);
    std::fflush(stderr);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
  }
  if (out_fd >= 0) close(out_fd);
  if (null_fd >= 0) close(null_fd);
}

}  // namespace

void AddDaemonFlags(FlagSet& flags, DaemonOptions& o) {
  flags.Add(
      "daemon", &o.daemon,
      "run in the background; the command returns 0 once the service is up (mount.kelp sets it)");
  flags.Add("logFile", &o.log_file,
            "with -daemon: the log file once up (appended); empty = /dev/null, or the journal "
            "under systemd");
}

absl::Status Daemonize(const DaemonOptions& opts) {
  g_log_file = opts.log_file;
  if (!g_log_file.empty()) {
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(g_log_file, ec);
    if (!ec) g_log_file = abs.string();
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("daemonize: pipe");
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return ErrnoStatus("daemonize: fork");
  }
  if (pid > 0) {
    close(fds[1]);
    WaitForChild(pid, fds[0]);
  }
  close(fds[0]);
  g_ready_fd = fds[1];
  g_ready_sent = false;  // this process is a new service: its readiness is still to come
  if (spdlog::get_level() < spdlog::level::warn) {
    g_level_before = spdlog::get_level();
    spdlog::set_level(spdlog::level::warn);
  }
  if (setsid() < 0) return ErrnoStatus("daemonize: setsid");
  return absl::OkStatus();
}

void NotifyReady(std::string_view status) {
  if (g_ready_sent) return;
  g_ready_sent = true;
  if (g_ready_fd >= 0) {
    RedirectStdio();
    if (g_level_before) spdlog::set_level(*g_level_before);
    g_level_before.reset();
    spdlog::info("ready: {}", status);
    char r = 'R';
    while (write(g_ready_fd, &r, 1) < 0 && errno == EINTR) {
    }
    close(g_ready_fd);
    g_ready_fd = -1;
  }
  std::string state = "READY=1";
  if (!status.empty()) kelp::StrAppend(&state, "\nSTATUS=", status);
  (void)SdNotify(state);
}

void NotifyStopping() { (void)SdNotify("STOPPING=1"); }

absl::Status SdNotify(std::string_view state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return absl::OkStatus();
  size_t len = std::strlen(path);
  sockaddr_un addr{};
  if ((path[0] != '/' && path[0] != '@') || len >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(kelp::StrCat("NOTIFY_SOCKET=", path, ": not a socket path"));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  socklen_t addr_len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len + (path[0] == '@' ? 0 : 1));
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("sd_notify: socket");
  ssize_t n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                     reinterpret_cast<const sockaddr*>(&addr), addr_len);
  int err = errno;
  close(fd);
  if (n < 0) return PosixError(err, kelp::StrCat("sd_notify ", path, ": ", strerror(err)));
  return absl::OkStatus();
}

void SetUpProcess() {
  // Fixed thresholds also turn off glibc's own adjustment, which only follows the sizes freed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rlim_t want = rl.rlim_max == RLIM_INFINITY ? 65536 : std::min<rlim_t>(rl.rlim_max, 65536);
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rl.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &rl);  // at worst the old limit stays
  }
}

}  // namespace kelp
