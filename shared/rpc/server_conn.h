// The server side of one connection (ServerConn), the event loop's state (Server::Loop) and a
// stream's cancel flag: internals of shared/rpc/server.cc, in a header of their own so the
// connection's buffers, TLS and epoll interest read apart from the server's dispatch. Included
// by server.cc only; not part of the API.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "shared/mutex.h"
#include "shared/rpc/server.h"
#include "shared/rpc/tls.h"

namespace kelp::rpc {

constexpr size_t kReadChunk = 64 << 10;
// Bytes read from one connection per wake-up before the loop serves the others.
constexpr size_t kReadBudget = 1 << 20;

struct StreamControl {
  std::atomic<bool> cancelled{false};
};

struct Server::Loop {
  int epfd = -1;
  int evfd = -1;
  // The loop's threads, one of them leading (in epoll_wait, or handling what it returned) and
  // the others following: waiting for the lead, or running the call that made them hand it on.
  std::vector<std::thread> threads;
  Mutex lead_mu;  // a leaf
  CondVar lead_cv;
  bool led ABSL_GUARDED_BY(lead_mu) = false;
  int idle ABSL_GUARDED_BY(lead_mu) = 0;  // followers waiting for the lead
  // The leader's alone, as is every connection's input: the lead passes under lead_mu.
  std::unordered_map<int, std::shared_ptr<ServerConn>> conns;
  // A kWorker call the leader keeps to run itself once it has handed the lead on (see
  // Server::LoopThread), instead of waking a worker.
  struct OwnCall {
    std::shared_ptr<ServerConn> conn;
    const Service::Method* m = nullptr;
    uint64_t id = 0;
    std::shared_ptr<google::protobuf::MessageLite> req;
  };
  std::optional<OwnCall> own;
  Mutex mu;  // a leaf: nothing is taken under it
  struct Incoming {
    int fd;
    std::string initial;
    bool needs_head;
    uint64_t client = 0;  // Kelp-Client id of an adopted connection
  };
  std::vector<Incoming> incoming ABSL_GUARDED_BY(mu);
};

// One client connection. Input is the loop thread's alone; output may be appended by any thread
// (inline replies, workers, streams) under out_mu.
class ServerConn {
 public:
  ServerConn(Server* server, Server::Loop* loop, int fd) : server_(server), loop_(loop), fd_(fd) {}
  ~ServerConn() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
  }

  int fd() const { return fd_; }

  // ---- TLS (loop thread; before any frame) ----
  // Puts the connection under TLS, server side; the handshake is run by Handshake().
  bool StartTls(SSL_CTX* ctx) {
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return false;
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_set_accept_state(ssl_);
    handshaking_ = true;
    return true;
  }
  bool handshaking() const { return handshaking_; }
  // Advances the handshake: true while it goes on or once done (handshaking() says which),
  // false when it failed (*why says how).
  bool Handshake(std::string* why) {
    int r, e = SSL_ERROR_NONE;
    {
      MutexLock lock(ssl_mu_);
      ERR_clear_error();
      r = SSL_do_handshake(ssl_);
      if (r != 1) {
        e = SSL_get_error(ssl_, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) *why = TlsFailure(ssl_, r);
      }
    }
    if (r == 1) {
      handshaking_ = false;
      return true;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
      MutexLock lock(out_mu_);
      write_armed_ = true;
      UpdateInterestLocked();
      return true;
    }
    return e == SSL_ERROR_WANT_READ;
  }

  // ---- input (loop thread) ----
  // Reads what the socket has, up to the read budget. Returns false on EOF or an error.
  bool ReadAvailable() {
    if (ssl_ != nullptr) return ReadAvailableTls();
    size_t total = 0;
    while (total < kReadBudget) {
      MakeInputRoom();
      ssize_t n = recv(fd_, in_.data() + in_len_, in_.size() - in_len_, 0);
      if (n > 0) {
        in_len_ += n;
        total += n;
        if (static_cast<size_t>(n) < in_.size() - (in_len_ - n)) return true;  // drained
        continue;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    return true;
  }
  // The same inside TLS. SSL_read hands over at most one record (16 KiB) per call, less than
  // the room made, so nothing decrypted is left inside OpenSSL when it says WANT_READ, and
  // level-triggered epoll sees every byte still unread.
  bool ReadAvailableTls() {
    size_t total = 0;
    while (total < kReadBudget) {
      MakeInputRoom();
      int n, e = SSL_ERROR_NONE;
      {
        MutexLock lock(ssl_mu_);
        ERR_clear_error();
        n = SSL_read(ssl_, in_.data() + in_len_, static_cast<int>(in_.size() - in_len_));
        if (n <= 0) e = SSL_get_error(ssl_, n);
      }
      if (n > 0) {
        in_len_ += n;
        total += n;
        continue;
      }
      ERR_clear_error();
      return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
    }
    return true;
  }
  void MakeInputRoom() {
    if (in_pos_ == in_len_) {
      in_pos_ = in_len_ = 0;
    } else if (in_pos_ > 0 && in_len_ + kReadChunk > in_.size()) {
      std::memmove(in_.data(), in_.data() + in_pos_, in_len_ - in_pos_);
      in_len_ -= in_pos_;
      in_pos_ = 0;
    }
    if (in_.size() < in_len_ + kReadChunk) in_.resize(in_len_ + kReadChunk);
  }
  std::string_view input() const { return std::string_view(in_.data() + in_pos_, in_len_ - in_pos_); }
  void AppendInput(std::string_view data) {
    if (data.empty()) return;
    if (in_.size() < in_len_ + data.size()) in_.resize(in_len_ + data.size());
    std::memcpy(in_.data() + in_len_, data.data(), data.size());
    in_len_ += data.size();
  }
  void Consume(size_t n) { in_pos_ += n; }
  bool needs_head = false;
  // The Kelp-Client id its upgrade request named (0: none): the caller id of its calls. Set
  // before its first frame is read, then only read.
  uint64_t client_id = 0;
  // Set by the loop while the client does not read its replies; read by any thread.
  std::atomic<bool> reading_paused{false};

  // ---- output (any thread) ----
  // Appends a frame for the loop to send with the rest of this read's replies.
  void Queue(std::string_view frame) {
    MutexLock lock(out_mu_);
    if (!closed_) out_.append(frame);
  }
  // Appends a frame and sends what the socket takes now (workers, streams). False once closed.
  bool SendNow(std::string_view frame) {
    MutexLock lock(out_mu_);
    if (closed_) return false;
    out_.append(frame);
    if (!write_armed_) FlushLocked();
    return !closed_;
  }
  // Sends what is buffered now, from any thread. False once closed.
  bool FlushNow() {
    MutexLock lock(out_mu_);
    if (closed_) return false;
    if (!write_armed_) FlushLocked();
    return !closed_;
  }
  // Sends what is buffered (loop thread). False on a hard error.
  bool Flush() {
    MutexLock lock(out_mu_);
    if (closed_) return false;
    if (write_armed_) return true;  // EPOLLOUT will come
    FlushLocked();
    return !closed_;
  }
  // EPOLLOUT arrived (loop thread).
  bool OnWritable() {
    MutexLock lock(out_mu_);
    if (closed_) return false;
    write_armed_ = false;
    FlushLocked();
    // Drained: take EPOLLOUT out of the interest set. Left in, a level-triggered EPOLLOUT on a
    // socket with room fires on every epoll_wait, and the loop spins on a whole core.
    if (!closed_ && !write_armed_) UpdateInterestLocked();
    return !closed_;
  }
  size_t pending_output() const {
    MutexLock lock(out_mu_);
    return out_.size() - out_pos_;
  }
  // Streams wait here while the client reads slower than they write.
  bool WaitOutputBelow(size_t bytes, const StreamControl& control) {
    MutexLock lock(out_mu_);
    while (!closed_ && out_.size() - out_pos_ > bytes && !control.cancelled.load()) {
      drained_.WaitFor(lock, std::chrono::milliseconds(100));
    }
    return !closed_;
  }
  void Close() {
    {
      MutexLock lock(out_mu_);
      closed_ = true;
    }
    drained_.NotifyAll();
    shutdown(fd_, SHUT_RDWR);
    MutexLock lock(streams_mu_);
    for (auto& [id, c] : streams_) {
      if (auto p = c.lock()) p->cancelled = true;
    }
  }
  bool closed() const {
    MutexLock lock(out_mu_);
    return closed_;
  }
  // Re-arms the loop's interest in this connection (EPOLLIN unless paused, EPOLLOUT when output
  // waits). Loop thread, or any thread holding out_mu_.
  void UpdateInterestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_) {
    epoll_event ev{};
    ev.events = (reading_paused ? 0u : EPOLLIN | EPOLLRDHUP) | (write_armed_ ? EPOLLOUT : 0u);
    ev.data.fd = fd_;
    epoll_ctl(loop_->epfd, EPOLL_CTL_MOD, fd_, &ev);
  }
  void UpdateInterest() {
    MutexLock lock(out_mu_);
    if (!closed_) UpdateInterestLocked();
  }

  // ---- streams ----
  void AddStream(uint64_t id, const std::shared_ptr<StreamControl>& c) {
    MutexLock lock(streams_mu_);
    streams_[id] = c;
  }
  void RemoveStream(uint64_t id) {
    MutexLock lock(streams_mu_);
    streams_.erase(id);
  }
  void CancelStream(uint64_t id) {
    MutexLock lock(streams_mu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    if (auto p = it->second.lock()) p->cancelled = true;
  }

  Server* server() const { return server_; }

 private:
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_) {
    while (out_pos_ < out_.size()) {
      if (ssl_ != nullptr) {
        if (!WriteTlsLocked()) return;
        continue;
      }
      ssize_t n = send(fd_, out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_pos_ += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        write_armed_ = true;
        UpdateInterestLocked();
        return;
      }
      FailOutputLocked();
      return;
    }
    if (out_.capacity() > (4 << 20)) {
      std::string().swap(out_);
    } else {
      out_.clear();
    }
    out_pos_ = 0;
    drained_.NotifyAll();
  }

  void FailOutputLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_) {
    closed_ = true;  // the peer is gone; the loop closes the connection on its next event
    out_.clear();
    out_pos_ = 0;
    drained_.NotifyAll();
  }
  // One SSL_write of what is buffered: true when it made progress; false when the socket is
  // full (EPOLLOUT armed) or the connection failed (closed_). A retry after WANT_WRITE passes
  // the same start and at least the same length, as OpenSSL requires (the buffer may move).
  bool WriteTlsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_) {
    int n, e = SSL_ERROR_NONE;
    {
      MutexLock lock(ssl_mu_);
      ERR_clear_error();
      size_t len = std::min<size_t>(out_.size() - out_pos_, 1 << 30);
      n = SSL_write(ssl_, out_.data() + out_pos_, static_cast<int>(len));
      if (n <= 0) e = SSL_get_error(ssl_, n);
    }
    if (n > 0) {
      out_pos_ += n;
      return true;
    }
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
      write_armed_ = true;
      UpdateInterestLocked();
    } else {
      FailOutputLocked();
    }
    return false;
  }

  Server* const server_;
  Server::Loop* const loop_;
  const int fd_;
  // TLS, when the server has it: set up by the loop before any frame. SSL_read (loop thread)
  // and SSL_write (any thread, under out_mu_) may not run at once on one SSL: ssl_mu_ is taken
  // around each, after out_mu_ (never the other way).
  SSL* ssl_ = nullptr;
  Mutex ssl_mu_ ABSL_ACQUIRED_AFTER(out_mu_);
  bool handshaking_ = false;  // loop thread
  std::string in_;
  size_t in_pos_ = 0;
  size_t in_len_ = 0;

  mutable Mutex out_mu_;
  CondVar drained_;
  std::string out_ ABSL_GUARDED_BY(out_mu_);
  size_t out_pos_ ABSL_GUARDED_BY(out_mu_) = 0;
  bool write_armed_ ABSL_GUARDED_BY(out_mu_) = false;
  bool closed_ ABSL_GUARDED_BY(out_mu_) = false;

  // Never held with out_mu_ or ssl_mu_; taken after the server's streams_mu_ (StartStream).
  Mutex streams_mu_;
  std::unordered_map<uint64_t, std::weak_ptr<StreamControl>> streams_ ABSL_GUARDED_BY(streams_mu_);
};

}  // namespace kelp::rpc
