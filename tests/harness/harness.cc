#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "shared/status.h"


namespace kelp::testing {

std::string KelpBinary() {
  if (const char* env = std::getenv("KELP_BIN")) return env;
  return KELP_BINARY;
}

int FreePort() {
  // Ports above 40000 keep port+10000 (the derived gRPC port) under 65536 but leave room.
  static std::mt19937 rng(getpid());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    int port = 20000 + static_cast<int>(rng() % 25000);
    bool ok = true;
    for (int p : {port, port + 10000}) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(p);
      inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
      if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ok = false;
      close(fd);
    }
    if (ok) return port;
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<Process>> Process::Start(const std::vector<std::string>& args,
                                                        const std::string& log_path) {
  int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return ErrnoStatus("open " + log_path);
  pid_t pid = fork();
  if (pid < 0) {
    close(log);
    return ErrnoStatus("fork");
  }
  if (pid == 0) {
    dup2(log, 1);
    dup2(log, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log);
  return std::unique_ptr<Process>(new Process(pid, log_path));
}

Process::~Process() { Stop(std::chrono::seconds(10)); }

bool Process::Running() {
  if (reaped_) return false;
  pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return !reaped_;
}

void Process::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

int Process::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Running()) {
    if (std::chrono::steady_clock::now() > deadline) return INT_MIN;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return -WTERMSIG(status_);
  return INT_MIN;
}

void Process::Kill() {
  Signal(SIGKILL);
  Wait(std::chrono::seconds(10));
}

int Process::Stop(std::chrono::milliseconds timeout) {
  if (reaped_) return WIFEXITED(status_) ? WEXITSTATUS(status_) : -WTERMSIG(status_);
  Signal(SIGTERM);
  int rc = Wait(timeout);
  if (rc == INT_MIN) {
    Kill();
    return -SIGKILL;
  }
  return rc;
}

std::string Process::Log() const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool WaitForHttp(const std::string& addr, const std::string& path, std::chrono::milliseconds timeout) {
  http::HttpClient client(http::HttpClient::Options{.connect_timeout_ms = 500, .io_timeout_ms = 2000});
  return WaitFor(
      [&] {
        auto r = client.Get(addr, path);
        return r.ok() && r->status == 200;
      },
      timeout);
}

bool WaitForLiveVolume(const std::string& filer_addr, std::chrono::milliseconds timeout) {
  http::HttpClient client(http::HttpClient::Options{.connect_timeout_ms = 500, .io_timeout_ms = 2000});
  return WaitFor(
      [&] {
        auto r = client.Get(filer_addr, "/status");
        if (!r.ok() || r->status != 200) return false;
        auto s = nlohmann::json::parse(r->body, nullptr, false);
        if (s.is_discarded() || !s.contains("topology")) return false;
        for (const auto& srv : s["topology"]["servers"]) {
          if (srv.value("alive", false)) return true;
        }
        return false;
      },
      timeout);
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    memcpy(s.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return s;
}

}  // namespace kelp::testing
