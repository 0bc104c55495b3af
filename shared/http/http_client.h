// A blocking HTTP/1.1 client with a keep-alive connection pool per host:port. Thread-safe:
// any number of threads may call Do() at once; each call takes its own pooled connection. A
// request that fails on a pooled connection the server had already closed is retried once
// on a fresh one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shared/http/http_parser.h"
#include "shared/mutex.h"

namespace kelp::http {

struct ClientResponse {
  int status = 0;
  Headers headers;
  std::string body;  // empty when a body sink was given
};

// Memory a 2xx body of known length may be received straight into (HttpClient::Do).
struct BodyBuffer {
  char* data = nullptr;
  size_t size = 0;
};

class HttpClient {
 public:
  struct Options {
    int connect_timeout_ms = 3000;
    int io_timeout_ms = 30000;
    size_t max_idle_per_host = 64;
    size_t max_body_bytes = 256 << 20;  // responses kept in memory
  };
  HttpClient();
  explicit HttpClient(Options options);
  ~HttpClient();

  // host_port: "127.0.0.1:8080". target: "/3,01637037d6?fsync=true" (already encoded).
  // on_body, when set, receives a 2xx response's body in pieces instead of
  // ClientResponse::body; returning an error aborts the transfer (and the connection). Other
  // responses' bodies (error texts) still go to ClientResponse::body. With into, a 2xx body
  // with a Content-Length of at most into.size is received straight into into.data (from its
  // start; a retry starts there again) and on_body sees the pieces where they landed: the
  // body is not copied through the client's buffer.
  absl::StatusOr<ClientResponse> Do(
      std::string_view method, std::string_view host_port, std::string_view target,
      const Headers& headers = {}, std::string_view body = {},
      const std::function<absl::Status(std::string_view)>& on_body = nullptr, BodyBuffer into = {});

  absl::StatusOr<ClientResponse> Get(std::string_view host_port, std::string_view target) {
    return Do("GET", host_port, target);
  }

  // A process-wide client for code that has no better owner.
  static HttpClient& Default();

 private:
  struct Idle {
    int fd;
    std::chrono::steady_clock::time_point since;
  };
  absl::StatusOr<int> Connect(std::string_view host_port);
  int TakeIdle(const std::string& host_port);
  void PutIdle(const std::string& host_port, int fd);
  absl::StatusOr<ClientResponse> DoOnce(
      int fd, std::string_view method, std::string_view host_port, std::string_view target,
      const Headers& headers, std::string_view body,
      const std::function<absl::Status(std::string_view)>& on_body, BodyBuffer into,
      bool* keep_alive, bool* got_bytes);

  Options opts_;
  Mutex mu_;
  std::map<std::string, std::vector<Idle>, std::less<>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::http
