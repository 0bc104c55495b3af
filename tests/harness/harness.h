// Helpers for tests that run real Kelp processes on loopback: free ports, temp dirs, child
// processes that are always reaped (SIGTERM, then SIGKILL) when the test ends, and waiting
// for a server to answer. Not thread-safe; use from the test's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/http/http_client.h"
#include "shared/testing/temp_dir.h"

namespace kelp::testing {

// Path of the kelp binary under test (set at build time; $KELP_BIN overrides).
std::string KelpBinary();

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();


class Process {
 public:
  // Starts args[0] with args; stdout and stderr go to log_path (appended).
  static absl::StatusOr<std::unique_ptr<Process>> Start(const std::vector<std::string>& args,
                                                        const std::string& log_path);
  ~Process();  // Stop()

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // Sends SIGKILL and reaps.
  void Kill();
  // SIGTERM, waits up to timeout, then SIGKILL. Returns the exit status (or -signal).
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Waits for exit; returns the exit code, -signal if killed, or nullopt-like INT_MIN on timeout.
  int Wait(std::chrono::milliseconds timeout);
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

 private:
  Process(pid_t pid, std::string log) : pid_(pid), log_path_(std::move(log)) {}
  pid_t pid_;
  std::string log_path_;
  bool reaped_ = false;
  int status_ = 0;
};

// Polls GET addr+path until it answers 200 or the timeout passes.
bool WaitForHttp(const std::string& addr, const std::string& path, std::chrono::milliseconds timeout);

// Polls the filer at addr (GET /status) until its topology lists a live volume server.
bool WaitForLiveVolume(const std::string& filer_addr, std::chrono::milliseconds timeout);

// Polls until pred() is true.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

std::string RandomBytes(size_t n, uint64_t seed);

}  // namespace kelp::testing
