#include "shared/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>

namespace kelp {
namespace {

// A datagram socket bound where systemd would listen; NOTIFY_SOCKET points at it.
class NotifyListener {
 public:
  explicit NotifyListener(bool abstract) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string name = "kelp-notify-test-" + std::to_string(getpid());
    socklen_t len;
    if (abstract) {
      env_ = "@" + name;
      std::memcpy(addr.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      path_ = "/tmp/" + name + ".sock";
      unlink(path_.c_str());
      env_ = path_;
      std::memcpy(addr.sun_path, path_.data(), path_.size());
      len = static_cast<socklen_t>(sizeof(addr));
    }
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0);
    setenv("NOTIFY_SOCKET", env_.c_str(), 1);
  }
  ~NotifyListener() {
    unsetenv("NOTIFY_SOCKET");
    close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }
  // The next datagram, or "" if none arrives within 5 s.
  std::string Receive() {
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, n) : "";
  }

 private:
  int fd_ = -1;
  std::string path_, env_;
};

}  // namespace

TEST_CASE("sd_notify: a datagram to a NOTIFY_SOCKET path") {
  NotifyListener l(false);
  REQUIRE(SdNotify("READY=1").ok());
  CHECK(l.Receive() == "READY=1");
  NotifyStopping();
  CHECK(l.Receive() == "STOPPING=1");
}

TEST_CASE("sd_notify: an abstract NOTIFY_SOCKET, and NotifyReady's status") {
  NotifyListener l(true);
  NotifyReady("serving on 127.0.0.1:8888");
  CHECK(l.Receive() == "READY=1\nSTATUS=serving on 127.0.0.1:8888");
}

TEST_CASE("sd_notify: nothing to do without NOTIFY_SOCKET, and a bad one is an error") {
  unsetenv("NOTIFY_SOCKET");
  CHECK(SdNotify("READY=1").ok());
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  CHECK(SdNotify("READY=1").code() == absl::StatusCode::kInvalidArgument);
  setenv("NOTIFY_SOCKET", "/nonexistent-dir/notify.sock", 1);
  CHECK_FALSE(SdNotify("READY=1").ok());
  unsetenv("NOTIFY_SOCKET");
}

namespace {

// Runs Daemonize in a forked child (its parent branch exits the process). The daemon writes
// `marker` before it is ready, then, if `ready`, calls NotifyReady and waits for `release` to
// be closed; if not ready, it exits 3. Returns the exit status of the starting process.
int RunDaemonized(bool ready, const std::string& marker, int release_read, int release_write) {
  pid_t starter = fork();
  REQUIRE(starter >= 0);
  if (starter == 0) {
    close(release_write);
    DaemonOptions o;
    o.daemon = true;
    if (!Daemonize(o).ok()) _exit(99);
    int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) close(fd);
    if (!ready) _exit(3);
    NotifyReady();
    char c;
    while (read(release_read, &c, 1) > 0) {
    }
    _exit(0);
  }
  // The starter must exit by itself; one that hangs fails the test instead of hanging it.
  int status = 0;
  for (int i = 0; i < 1000; ++i) {
    pid_t r = waitpid(starter, &status, WNOHANG);
    if (r == starter) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    usleep(10000);
  }
  kill(starter, SIGKILL);
  waitpid(starter, &status, 0);
  return -2;  // still waiting after 10 s
}

}  // namespace

TEST_CASE("daemonize: the starting process exits 0 only once the daemon is ready") {
  std::string marker = "/tmp/kelp-daemon-test-" + std::to_string(getpid());
  unlink(marker.c_str());
  int release[2];
  REQUIRE(pipe(release) == 0);
  int rc = RunDaemonized(true, marker, release[0], release[1]);
  CHECK(rc == 0);
  struct stat st;
  CHECK(stat(marker.c_str(), &st) == 0);  // written before NotifyReady, so before the exit
  close(release[1]);                      // lets the daemon end
  close(release[0]);
  unlink(marker.c_str());
}

TEST_CASE("daemonize: a daemon that ends before it is ready fails the start with its code") {
  std::string marker = "/tmp/kelp-daemon-test-fail-" + std::to_string(getpid());
  int release[2];
  REQUIRE(pipe(release) == 0);
  CHECK(RunDaemonized(false, marker, release[0], release[1]) == 3);
  close(release[0]);
  close(release[1]);
  unlink(marker.c_str());
}

}  // namespace kelp
