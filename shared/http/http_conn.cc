#include "shared/http/http_conn.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::http {
namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kFlushThreshold = 64 << 10;
// Buffer memory an idle connection keeps; more is given back between requests.
constexpr size_t kIdleReserve = 4 << 10;

void SetRecvTimeout(int fd, int64_t ms) {
  if (ms < 1) ms = 1;
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// A body the client failed to deliver: its fault, a 4xx, whatever the socket said.
absl::Status ClientBodyError(int http_status, std::string_view what) {
  absl::Status s = http_status == 408 ? absl::DeadlineExceededError(std::string(what))
                                      : absl::InvalidArgumentError(std::string(what));
  return WithHttpStatus(std::move(s), http_status);
}

}  // namespace

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

Conn::Conn(HttpServer* server, int fd, std::string peer, int64_t now_ms)
    : server_(server), last_activity_ms_(now_ms), fd_(fd) {
  req_.peer_ = std::move(peer);
}

Conn::~Conn() {
  if (fd_ >= 0) close(fd_);
}

ssize_t Conn::ReadSome() {
  if (in_pos_ == in_len_) {
    in_len_ = in_pos_ = 0;
  } else if (in_pos_ > (256 << 10) && in_pos_ > in_len_ / 2) {
    in_.erase(0, in_pos_);
    in_len_ -= in_pos_;
    in_pos_ = 0;
  }
  ssize_t n;
  if (blocking_) {
    // Straight into the buffer: a worker streaming a large body reads 64 KiB at a time.
    if (in_.size() < in_len_ + kReadChunk) in_.resize(in_len_ + kReadChunk);
    do {
      n = recv(fd_, in_.data() + in_len_, kReadChunk, 0);
    } while (n < 0 && errno == EINTR);
  } else {
    // Through a per-thread scratch buffer, so that a connection holds only the bytes it has
    // (a few hundred for a typical request), not a 64 KiB buffer each.
    thread_local char scratch[kReadChunk];
    do {
      n = recv(fd_, scratch, sizeof scratch, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      if (in_.size() < in_len_ + n) in_.resize(in_len_ + n);
      std::memcpy(in_.data() + in_len_, scratch, n);
    }
  }
  if (n > 0) in_len_ += n;
  return n;
}

void Conn::StartBody(const Limits& limits) {
  limits_ = limits;
  body_wait_ms_ = 0;
  body_bytes_ = 0;
}

template <typename ReadFn>
absl::StatusOr<size_t> Conn::ReadBody(ReadFn read) {
  if (!blocking_) return absl::InternalError("request body incomplete on the event loop");
  // The client may take body_grace_ms plus one second per body_min_rate bytes it has sent,
  // counting only the time spent waiting for it (not the time the handler spent elsewhere).
  int64_t budget = limits_.body_grace_ms - body_wait_ms_;
  if (limits_.body_min_rate > 0) budget += static_cast<int64_t>(body_bytes_ * 1000 / limits_.body_min_rate);
  if (budget <= 0) return ClientBodyError(408, "request body too slow");
  SetRecvTimeout(fd_, std::min<int64_t>(budget, limits_.io_timeout_ms));
  int64_t start = NowMs();
  ssize_t n = read();
  int err = errno;
  body_wait_ms_ += NowMs() - start;
  if (n > 0) {
    body_bytes_ += static_cast<uint64_t>(n);
    return static_cast<size_t>(n);
  }
  if (n == 0) return ClientBodyError(400, "client closed the connection mid-body");
  if (err == EAGAIN || err == EWOULDBLOCK) return ClientBodyError(408, "timed out reading the request body");
  return ClientBodyError(400, kelp::StrCat("reading the request body: ", std::strerror(err)));
}

absl::Status Conn::Fill() { return ReadBody([this] { return ReadSome(); }).status(); }

absl::StatusOr<size_t> Conn::FillDirect(char* buf, size_t n) {
  if (buffered() > 0) return absl::InternalError("direct body read with input buffered");
  return ReadBody([&] {
    ssize_t r;
    do {
      r = recv(fd_, buf, n, 0);
    } while (r < 0 && errno == EINTR);
    return r;
  });
}

absl::Status Conn::FlushBlocking() {
  while (out_pos_ < out_.size()) {
    ssize_t n = send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      write_failed_ = true;
      return ErrnoStatus("send response");
    }
    out_pos_ += n;
  }
  out_.clear();
  out_pos_ = 0;
  return absl::OkStatus();
}

absl::Status Conn::Emit(std::string_view data) {
  if (write_failed_) return absl::UnavailableError("connection lost");
  if (!blocking_) {
    Append(data);
    return absl::OkStatus();
  }
  if (data.size() >= kFlushThreshold) {
    RETURN_IF_ERROR(FlushBlocking());
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        write_failed_ = true;
        return ErrnoStatus("send response");
      }
      data.remove_prefix(n);
    }
    return absl::OkStatus();
  }
  Append(data);
  if (out_.size() >= kFlushThreshold) return FlushBlocking();
  return absl::OkStatus();
}

bool Conn::FlushSome() {
  while (out_pos_ < out_.size()) {
    ssize_t n = send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      return false;
    }
    out_pos_ += n;
  }
  out_.clear();
  out_pos_ = 0;
  return true;
}

void Conn::TrimIdle() {
  if (in_pos_ == in_len_ && in_.capacity() > kIdleReserve) {
    std::string().swap(in_);
    in_len_ = in_pos_ = 0;
  }
  if (out_empty() && out_.capacity() > kIdleReserve) std::string().swap(out_);
}

}  // namespace kelp::http
