// A VolumeServer on free loopback ports in a temporary directory, for tests; optionally
// heartbeating to a FakeCluster.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "shared/http/http_client.h"
#include "shared/strings.h"
#include "volume/server/fake_cluster.h"
#include "volume/server/volume_server.h"
#include "volume/store/store.h"
#include "volume/store/test_util.h"

namespace kelp::volume::testing {

inline VolumeServer::Options TestOptions(const std::string& dir,
                                         const FakeCluster* cluster = nullptr) {
  VolumeServer::Options o;
  o.dir = dir;
  o.port = 0;
  o.http_loop_threads = 2;
  o.http_worker_threads = 8;
  o.vacuum_interval_sec = 0;
  o.pulse_ms = 50;
  if (cluster) {
    o.filer = "127.0.0.1:1";  // only its gRPC port matters
    o.filer_grpc_port = cluster->port();
  } else {
    o.filer = "";
  }
  return o;
}

struct TestServer {
  TempDir dir;
  std::unique_ptr<VolumeServer> server;
  http::HttpClient client;

  explicit TestServer(const FakeCluster* cluster = nullptr,
                      const std::function<void(VolumeServer::Options&)>& tweak = nullptr) {
    VolumeServer::Options o = TestOptions(dir.path(), cluster);
    if (tweak) tweak(o);
    server = std::make_unique<VolumeServer>(o);
    absl::Status s = server->Start();
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
  std::string addr() const { return server->url(); }

  http::ClientResponse Do(std::string_view method, std::string_view target,
                          std::string_view body = {}, const http::Headers& h = {}) {
    auto r = client.Do(method, addr(), target, h, body);
    INFO(method << " " << target << ": " << r.status().ToString());
    REQUIRE(r.ok());
    return std::move(*r);
  }
};

// Sends raw bytes on a fresh connection, half-closes, returns everything the server says.
inline std::string RawExchange(const std::string& host_port, const std::string& wire) {
  int port = std::stoi(host_port.substr(host_port.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  REQUIRE(send(fd, wire.data(), wire.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(wire.size()));
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

// Polls cond every 10 ms for up to timeout.
inline bool WaitFor(const std::function<bool()>& cond,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

}  // namespace kelp::volume::testing
