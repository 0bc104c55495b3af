// kill -9 of a `kelp volume` process in the middle of a write storm, then a restart on the
// same directory: every blob whose upload was acknowledged must read back intact, and the
// server must accept writes again. Multi-process, so it lives in tests/.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/file_id.h"
#include "shared/status.h"
#include "volume/client/volume_client.h"
#include "volume/store/test_util.h"

using kelp::FileId;
using kelp::volume::VolumeClient;
using kelp::volume::testing::RandomBlob;
using kelp::volume::testing::TempDir;

namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class VolumeProcess {
 public:
  VolumeProcess(std::string dir, int port, int grpc_port)
      : dir_(std::move(dir)), port_(port), grpc_port_(grpc_port) {}
  ~VolumeProcess() { Kill(SIGKILL); }

  void Start() {
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      std::string d = "-dir=" + dir_, p = "-port=" + std::to_string(port_),
                  g = "-port.grpc=" + std::to_string(grpc_port_);
      execl(KELP_BINARY, KELP_BINARY, "volume", d.c_str(), p.c_str(), g.c_str(),
            "-filer=", "-logLevel=warn", "-vacuumIntervalSec=0", static_cast<char*>(nullptr));
      _exit(127);
    }
    VolumeClient c;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      // Up once both planes answer (HTTP: any status will do).
      auto r = c.Read(url(), "1,0100000001");
      if ((r.ok() || r.status().code() != absl::StatusCode::kUnavailable) &&
          c.GetStatus(grpc()).ok()) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL("kelp volume did not come up");
  }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string url() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string grpc() const { return "127.0.0.1:" + std::to_string(grpc_port_); }

 private:
  std::string dir_;
  int port_, grpc_port_;
  pid_t pid_ = -1;
};

std::string Blob(uint64_t key) { return RandomBlob(key, 100 + (key * 7919) % 300000); }

}  // namespace

TEST_CASE("kill -9 during writes loses nothing acknowledged") {
  TempDir dir;
  VolumeProcess server(dir.path(), FreePort(), FreePort());
  server.Start();
  VolumeClient client;
  absl::Status allocated = client.AllocateVolume(server.grpc(), 1, "", "000");
  INFO(allocated.ToString());
  REQUIRE(allocated.ok());
  std::mutex mu;
  std::vector<uint64_t> acked;
  std::atomic<uint64_t> next{1};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      while (!stop) {
        uint64_t key = next++;
        auto r =
            client.Upload(server.url(), FileId{1, key, 0xfeed}.ToString(), Blob(key), t % 4 == 0);
        if (r.ok()) {
          std::lock_guard l(mu);
          acked.push_back(key);
        }
      }
    });
  }
  // Let a few hundred writes land, then pull the plug mid-storm.
  while (true) {
    {
      std::lock_guard l(mu);
      if (acked.size() >= 300) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server.Kill(SIGKILL);
  stop = true;
  for (auto& w : writers) w.join();
  INFO(acked.size() << " acknowledged writes before the kill");

  server.Start();
  for (uint64_t key : acked) {
    auto r = client.Read(server.url(), FileId{1, key, 0xfeed}.ToString());
    INFO("key " << key << ": " << r.status().ToString());
    REQUIRE(r.ok());
    REQUIRE(*r == Blob(key));
  }
  // And the volume takes writes again.
  uint64_t key = next++;
  REQUIRE(client.Upload(server.url(), FileId{1, key, 0xfeed}.ToString(), Blob(key), true).ok());
  REQUIRE(*client.Read(server.url(), FileId{1, key, 0xfeed}.ToString()) == Blob(key));
}
