// Internal to the HTTP server (http_server.cc, http_request.cc): one client connection, its
// buffers and its socket I/O in both modes. Not part of the API.
//
// Ownership: a Conn belongs to its event loop. While a worker runs its request (on_worker_
// is true, set and cleared by the loop) only that worker touches it; the loop neither reads
// its socket nor sweeps it for timeouts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "shared/http/http_request.h"

namespace kelp::http {

class HttpServer;

// Monotonic milliseconds (CLOCK_MONOTONIC_COARSE: the timeouts here are in seconds).
int64_t NowMs();

class Conn {
 public:
  struct Limits {
    int io_timeout_ms = 60000;
    int body_grace_ms = 20000;
    int64_t body_min_rate = 4096;  // bytes/s
  };
  Conn(HttpServer* server, int fd, std::string peer, int64_t now_ms);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  int fd() const { return fd_; }
  // Gives the socket away (an upgrade): the destructor leaves it open.
  int ReleaseFd() { return std::exchange(fd_, -1); }
  size_t buffered() const { return in_len_ - in_pos_; }
  std::string_view pending_input() const { return std::string_view(in_.data() + in_pos_, in_len_ - in_pos_); }

  // Reads once from the socket into the input buffer. Returns bytes read, 0 on EOF, -1 on
  // error (errno set; EAGAIN in non-blocking mode).
  ssize_t ReadSome();
  // Worker mode: more body bytes from the socket, within the body's time budget (see
  // HttpServer::Options). Errors are the client's (4xx): closed or reset mid-body (400), too
  // slow (408).
  absl::Status Fill();
  // Worker mode, nothing buffered: reads up to n body bytes from the socket straight into buf
  // (a large body is not copied through the input buffer), under Fill's budget and errors.
  absl::StatusOr<size_t> FillDirect(char* buf, size_t n);
  void Consume(size_t n) { in_pos_ += n; }
  void Append(std::string_view data) { out_.append(data); }
  // Worker mode: writes everything buffered.
  absl::Status FlushBlocking();
  // Output path of ResponseWriter in both modes.
  absl::Status Emit(std::string_view data);
  // Loop mode: writes what the socket takes. Returns false on a hard error.
  bool FlushSome();
  bool out_empty() const { return out_pos_ == out_.size(); }
  // Loop mode, between requests: gives back buffer memory beyond a small reserve, so that
  // thousands of idle keep-alive connections cost little.
  void TrimIdle();
  // Worker mode: starts the time budget of a body read from the socket.
  void StartBody(const Limits& limits);

  HttpServer* server_;
  Request req_;
  bool have_head_ = false;
  bool blocking_ = false;    // worker thread owns the socket (blocking I/O)
  bool on_worker_ = false;   // loop's view: handed off, not ours until returned
  bool want_close_ = false;
  bool write_armed_ = false;
  bool continue_sent_ = false;
  bool write_failed_ = false;
  int64_t last_activity_ms_ = 0;  // last byte read or written (loop mode)
  int64_t request_start_ms_ = 0;  // first byte of the request being received; 0 = none

 private:
  int fd_;
  // Fill's and FillDirect's budget and errors around one read (read returns like recv).
  template <typename ReadFn>
  absl::StatusOr<size_t> ReadBody(ReadFn read);

  std::string in_;  // bytes [in_pos_, in_len_) are unparsed input; the rest is spare room
  size_t in_len_ = 0;
  size_t in_pos_ = 0;
  std::string out_;
  size_t out_pos_ = 0;
  // Body time budget (worker mode): time spent waiting for the client, bytes it sent.
  Limits limits_;
  int64_t body_wait_ms_ = 0;
  uint64_t body_bytes_ = 0;
};

}  // namespace kelp::http
