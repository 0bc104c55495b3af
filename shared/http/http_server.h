// An HTTP/1.1 server with keep-alive and pipelining, built for many small requests.
//
// Threads: `loop_threads` event loops (epoll, level-triggered) share one listening socket.
// A request whose handler says RunInline() is answered on its loop thread with its body fully
// buffered: no hand-off, no context switch (the volume server's small GETs live here). Any
// other request takes its connection off the loop and runs on a worker thread with blocking
// socket I/O, so a handler can stream a large body in or out, wait on fsync or call another
// server; afterwards the connection returns to its loop. Both modes dispatch through one path
// and the handler API (http_request.h) is the same. Handlers run concurrently on many threads
// and must be thread-safe.
//
// Limits (docs/reliability.md): a client cannot starve others or exhaust memory by holding
// connections, sending slowly, or announcing a huge body.
//  - At most max_connections; a new connection beyond it evicts the longest-idle keep-alive
//    connection (or one stuck in a request head for over a second) instead of being refused.
//  - A request head (and an inline body) must arrive within request_timeout_ms of its first
//    byte (slowloris): else 408 and close. An idle keep-alive connection closes after
//    idle_timeout_ms; one whose client does not read its responses after io_timeout_ms.
//  - A streamed body gets request_timeout_ms of grace, then must average body_min_rate
//    bytes/s of the time spent waiting for it: else 408. One blocking read or write waits at
//    most io_timeout_ms.
//  - Heads are at most max_head_bytes (431 beyond); an idle connection keeps no buffers.
//    Body sizes are the handlers' to bound (ReadAll(limit) answers 413).
// Responses are counted by class (kelp_http_responses_total{class="4xx"...}): a client's
// fault (a body cut short, a timeout, a bad request) is a 4xx, never a 5xx.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "shared/http/http_request.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/thread_pool.h"

namespace kelp::http {

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
    int io_timeout_ms = 60000;           // one blocking socket read or write; a stalled reader of responses
    int max_connections = 20000;
    std::string name = "http";           // thread names and metrics label
    int idle_timeout_ms = 120000;        // keep-alive connection with no request in progress
    int request_timeout_ms = 20000;      // a head from its first byte; the grace of a streamed body
    int64_t body_min_rate = 4096;        // bytes/s a streamed body averages after its grace; 0 = any
    // Protocols this server hands connections over to (HTTP Upgrade, RFC 9110 7.8): a request
    // without a body carrying `Upgrade: <protocol>` for a protocol named here is not answered;
    // its socket and the bytes that came after its head go to the function, which owns them
    // from then on (and answers 101 itself), with the request (for its headers). Called on a
    // loop thread: it must not block.
    using UpgradeFn = std::function<void(int fd, std::string initial, const Request& req)>;
    std::map<std::string, UpgradeFn, std::less<>> upgrades;
    // Whether an upgrade request may go on (e.g. it carries a token): a non-OK status is the
    // answer (401...) and the connection is closed. Empty = every upgrade may.
    std::function<absl::Status(const Request&)> upgrade_check;
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
  // Out of descriptors: accepts one pending connection with the spare descriptor and closes
  // it (counted as refused). False when there was no spare to give (another thread took the
  // one freed): the caller stops listening until the next sweep.
  bool RefuseWithSpare();
  // Puts the listening socket in loop's epoll set (again); loop->accepting says whether it is.
  void ArmListener(Loop* loop);
  void CloseSpare();
  bool EvictOne(Loop* loop, int64_t now);
  void Sweep(Loop* loop, int64_t now);
  void ProcessInput(Loop* loop, Conn* conn);
  void HandOff(Loop* loop, Conn* conn);
  void RunBlocking(Loop* loop, Conn* conn);
  // The one dispatch path of both modes: runs the handler, completes its response, counts it.
  void Dispatch(Conn* conn);
  void CloseConn(Loop* loop, Conn* conn);
  void FlushOrArm(Loop* loop, Conn* conn);
  void EmitError(Conn* conn, int status, std::string_view message);
  // Hands an upgraded connection over (Options::upgrades); false if it cannot be now.
  bool Upgrade(Loop* loop, Conn* conn, const Request& req, const Options::UpgradeFn& to);

  Options opts_;
  Handler* handler_;
  Counter* requests_ = nullptr;
  Counter* inline_requests_ = nullptr;
  Counter* bad_requests_ = nullptr;
  Counter* responses_[6] = {};  // by class: [0] other, [1] 1xx ... [5] 5xx
  Counter* timeouts_ = nullptr;
  Counter* evicted_ = nullptr;
  Counter* refused_ = nullptr;
  Gauge* open_ = nullptr;
  int listen_fd_ = -1;
  // Given up to accept-and-close a pending connection when out of descriptors (EMFILE).
  Mutex spare_mu_;
  int spare_fd_ ABSL_GUARDED_BY(spare_mu_) = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::vector<std::unique_ptr<Loop>> loops_;
  std::unique_ptr<ThreadPool> workers_;
  Mutex blocking_mu_;
  std::unordered_set<int> blocking_fds_ ABSL_GUARDED_BY(blocking_mu_);  // shut down on Stop
};

// Serves GET /metrics from the default registry. Returns true if it handled the request.
bool ServeMetrics(const Request& req, ResponseWriter& w);

}  // namespace kelp::http
