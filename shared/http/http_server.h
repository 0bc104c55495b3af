// An HTTP/1.1 server with keep-alive and pipelining, built for many small requests.
//
// Threads: `loop_threads` event loops (epoll, level-triggered) share one listening socket.
// A request whose handler says RunInline() is answered on its loop thread with its body fully
// buffered: no hand-off, no context switch (the volume server's small GETs live here). Any
// other request takes its connection off the loop and runs on a worker thread with blocking
// socket I/O, so a handler can stream a large body in or out, wait on fsync or call another
// server; afterwards the connection returns to its loop. The handler API is the same in both
// modes. Handlers run concurrently on many threads and must be thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/http/http_parser.h"
#include "shared/metrics.h"
#include "shared/thread_pool.h"

namespace kelp::http {

class Conn;

// The request as a handler sees it. The body is read through Read/ReadAll, once.
class Request {
 public:
  const std::string& method() const { return head_.method; }
  const std::string& target() const { return head_.target; }
  const std::string& path() const { return head_.path; }  // percent-decoded
  const std::string& raw_query() const { return head_.query; }
  const Headers& headers() const { return head_.headers; }
  std::string_view header(std::string_view name) const { return head_.headers.Get(name); }
  std::optional<std::string> query(std::string_view key) const { return QueryParam(head_.query, key); }
  // Content-Length, or -1 for a chunked body.
  int64_t content_length() const { return head_.framing.chunked ? -1 : head_.framing.content_length; }
  const std::string& peer() const { return peer_; }

  // Reads up to n body bytes; 0 at the end of the body.
  absl::StatusOr<size_t> Read(char* buf, size_t n);
  // Reads the whole body; ResourceExhausted (HTTP 413) if it exceeds limit bytes.
  absl::StatusOr<std::string> ReadAll(size_t limit);
  // Reads until buf holds n bytes or the body ends; returns the bytes read.
  absl::StatusOr<size_t> ReadFull(char* buf, size_t n);
  bool body_done() const { return body_done_; }

 private:
  friend class Conn;
  friend class HttpServer;
  friend class ResponseWriter;
  RequestHead head_;
  std::string peer_;
  Conn* conn_ = nullptr;
  uint64_t body_left_ = 0;  // for Content-Length bodies
  ChunkedDecoder chunked_;
  bool body_done_ = false;
};

// Writes one response. Either Send(...) once, or WriteHead then Write* (then optionally Finish).
// For HEAD requests the body is dropped automatically; Content-Length stays as given.
class ResponseWriter {
 public:
  void Send(int status, std::string_view body, std::string_view content_type = "text/plain; charset=utf-8",
            const Headers& extra = {});
  void SendJson(int status, std::string_view json, const Headers& extra = {});
  // {"error": message} with the given status.
  void SendError(int status, std::string_view message);
  // The edge conversion: status -> HTTP code + {"error": ...}.
  void SendStatus(const absl::Status& status);

  // content_length < 0 selects chunked transfer coding.
  absl::Status WriteHead(int status, const Headers& headers, int64_t content_length);
  absl::Status Write(std::string_view data);
  absl::Status Finish();

  bool head_written() const { return head_written_; }
  int status() const { return status_; }
  // Close the connection after this response.
  void CloseAfter() { close_after_ = true; }

 private:
  friend class Conn;
  friend class HttpServer;
  Conn* conn_ = nullptr;
  bool head_request_ = false;
  bool head_written_ = false;
  bool finished_ = false;
  bool chunked_ = false;
  bool close_after_ = false;
  int status_ = 0;
  int64_t body_left_ = 0;
  uint64_t body_bytes_ = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Called on a loop thread with the head only (no body yet). True means Handle may run on the
  // loop: it must be quick, not block on anything slow, and the body is at most
  // HttpServer::Options::inline_body_limit bytes.
  virtual bool RunInline(const Request& head) const { return false; }
  virtual void Handle(Request& req, ResponseWriter& w) = 0;
};

class HttpServer {
 public:
  struct Options {
    std::string ip = "127.0.0.1";
    int port = 0;                        // 0 = any free port (see port())
    int loop_threads = 0;                // 0 = number of cores
    int worker_threads = 64;             // blocking-mode handlers at once
    size_t worker_queue = 4096;          // requests waiting for a worker before 503
    size_t inline_body_limit = 64 << 10; // bytes; bigger bodies go to a worker
    size_t max_head_bytes = 64 << 10;    // request line + headers; more is 431
    int io_timeout_ms = 60000;           // blocking-mode socket read/write timeout
    int max_connections = 20000;
    std::string name = "http";           // thread names and metrics label
    // Protocols this server hands connections over to (HTTP Upgrade, RFC 9110 7.8): a request
    // without a body carrying `Upgrade: <protocol>` for a protocol named here is not answered;
    // its socket and the bytes that came after its head go to the function, which owns them
    // from then on (and answers 101 itself). Called on a loop thread: it must not block.
    std::map<std::string, std::function<void(int fd, std::string initial)>, std::less<>> upgrades;
  };

  HttpServer(Options options, Handler* handler);
  ~HttpServer();  // Stop()

  absl::Status Start();
  void Stop();
  int port() const { return port_; }

 private:
  friend class Conn;
  struct Loop;
  void RunLoop(Loop* loop);
  void Accept(Loop* loop);
  void ProcessInput(Loop* loop, Conn* conn);
  void HandOff(Loop* loop, Conn* conn);
  void RunBlocking(Loop* loop, Conn* conn);
  void CloseConn(Loop* loop, Conn* conn);
  void FlushOrArm(Loop* loop, Conn* conn);
  // Hands an upgraded connection over (Options::upgrades); false if it cannot be now.
  bool Upgrade(Loop* loop, Conn* conn, const std::function<void(int, std::string)>& to);

  Options opts_;
  Handler* handler_;
  Counter* requests_ = nullptr;
  Counter* inline_requests_ = nullptr;
  Counter* bad_requests_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::vector<std::unique_ptr<Loop>> loops_;
  std::unique_ptr<ThreadPool> workers_;
  std::mutex blocking_mu_;
  std::unordered_set<int> blocking_fds_ ABSL_GUARDED_BY(blocking_mu_);  // shut down on Stop
};

// Serves GET /metrics from the default registry. Returns true if it handled the request.
bool ServeMetrics(const Request& req, ResponseWriter& w);

}  // namespace kelp::http
