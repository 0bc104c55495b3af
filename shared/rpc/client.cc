#include "shared/rpc/client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shared/blocking.h"
#include "shared/rpc/tls.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::rpc {
namespace {

using Clock = std::chrono::steady_clock;

// How long a reader sleeps in recv() before it looks at its deadline again.
constexpr int kRecvSliceMs = 50;
constexpr size_t kReadChunk = 64 << 10;
// Messages a stream may hold unread before it is failed (a consumer that stopped reading).
constexpr size_t kMaxStreamBacklog = 1 << 16;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

absl::Status Unavailable(std::string_view address, std::string_view what) {
  return absl::UnavailableError(kelp::StrCat(address, ": ", what));
}

// "host:port" or "[v6]:port" into host and port.
absl::Status SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError(kelp::StrCat("address without a port: ", address));
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  return absl::OkStatus();
}

// Connects to host:port within the deadline; returns a blocking socket.
absl::StatusOr<int> Dial(const std::string& address, Clock::time_point deadline) {
  std::string host, port;
  RETURN_IF_ERROR(SplitHostPort(address, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Unavailable(address, kelp::StrCat("cannot resolve: ", gai_strerror(rc)));
  }
  absl::Status last = Unavailable(address, "no address");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, RemainingMs(deadline));
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (rc == 1 && err == 0) {
        rc = 0;
      } else {
        errno = rc == 0 ? ETIMEDOUT : err;
        rc = -1;
      }
    }
    if (rc == 0) {
      freeaddrinfo(res);
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) & ~O_NONBLOCK);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
      int idle = 10, intvl = 5, cnt = 3;
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
      timeval tv{0, kRecvSliceMs * 1000};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      timeval stv{30, 0};  // a server that stops reading for this long is taken for dead
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof stv);
      return fd;
    }
    last = Unavailable(address, kelp::StrCat("connect: ", strerror(errno)));
    close(fd);
  }
  freeaddrinfo(res);
  return last;
}

}  // namespace

// One call in flight. Its fields but stream (set before it is registered) are guarded by its
// connection's mu_, a lock of another object that ABSL_GUARDED_BY cannot name here.
struct PendingCall {
  CondVar cv;
  bool stream = false;
  bool done = false;       // the final frame came, or the call failed
  bool waiting = false;    // a thread sleeps on cv
  bool reading = false;    // its waiting thread reads the socket for everyone
  // Channel::Options::reply_poll: until when its caller, reading alone, polls before it sleeps
  // (set before it is registered); whether it polled, and whether the poll found bytes.
  Clock::time_point poll_until{};
  bool polled = false;
  bool caught = false;
  absl::Status status;
  std::string reply;
  std::deque<std::string> items;  // stream messages not taken yet
};

class ClientConn {
 public:
  ClientConn(std::string address, int fd, size_t max_payload)
      : address_(std::move(address)), fd_(fd), max_payload_(max_payload) {}
  ~ClientConn() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
  }

  // After the 101: the TLS handshake, as a client presenting ctx's certificate and expecting
  // the server's to name host. From then on the socket is non-blocking and every SSL call
  // takes ssl_mu_ without ever sleeping under it (the reader polls outside it).
  absl::Status StartTls(SSL_CTX* ctx, const std::string& host, Clock::time_point deadline) {
    if (rlen_ != 0) return Unavailable(address_, "bytes after the 101 where the TLS handshake should start");
    IgnoreSigpipe();
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
      return absl::InternalError(kelp::StrCat("SSL_new: ", OpenSslError()));
    }
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    RETURN_IF_ERROR(ExpectPeerHost(ssl_, host));
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL, 0) | O_NONBLOCK);
    for (;;) {
      ERR_clear_error();
      int r = SSL_connect(ssl_);
      if (r == 1) return absl::OkStatus();
      int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        return Unavailable(address_, kelp::StrCat("TLS handshake: ", TlsFailure(ssl_, r)));
      }
      int left = RemainingMs(deadline);
      if (left == 0) return absl::DeadlineExceededError(kelp::StrCat(address_, ": TLS handshake timed out"));
      pollfd p{fd_, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      poll(&p, 1, left);
    }
  }

  // Upgrades the fresh connection to frames.
  absl::Status Upgrade(Clock::time_point deadline, std::string_view extra_headers) {
    std::string req = kelp::StrCat("GET ", kUpgradePath, " HTTP/1.1\r\nHost: ", address_,
                                   "\r\nConnection: Upgrade\r\nUpgrade: ", kUpgradeProtocol, "\r\n", extra_headers,
                                   "\r\n");
    RETURN_IF_ERROR(SendAll(req));
    for (;;) {
      absl::StatusOr<size_t> head = ParseUpgradeResponse(std::string_view(rbuf_.data(), rlen_));
      if (!head.ok()) return Unavailable(address_, ToStd(head.status().message()));
      if (*head > 0) {
        std::memmove(rbuf_.data(), rbuf_.data() + *head, rlen_ - *head);
        rlen_ -= *head;
        return absl::OkStatus();
      }
      if (Clock::now() >= deadline) return absl::DeadlineExceededError(kelp::StrCat(address_, ": rpc upgrade timed out"));
      RETURN_IF_ERROR(RecvSome());
    }
  }

  bool broken() {
    MutexLock lock(mu_);
    return !broken_.ok();
  }

  // Whether bytes came from the server within the last `within`.
  bool HeardWithin(std::chrono::nanoseconds within) const {
    return Clock::now().time_since_epoch().count() - last_heard_ns_.load(std::memory_order_relaxed) <
           within.count();
  }

  // Fails the connection if the peer closed its end or it is in error (no blocking).
  void FailIfClosed() {
    pollfd p{fd_, POLLRDHUP, 0};
    if (poll(&p, 1, 0) != 1 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) return;
    MutexLock lock(mu_);
    FailLocked(Unavailable(address_, "the server closed the connection"));
  }

  // Registers a call; returns its id, or the connection's failure.
  absl::StatusOr<uint64_t> Register(const std::shared_ptr<PendingCall>& call) {
    MutexLock lock(mu_);
    if (!broken_.ok()) return broken_;
    uint64_t id = next_id_++;
    calls_[id] = call;
    return id;
  }
  void Unregister(uint64_t id) {
    MutexLock lock(mu_);
    calls_.erase(id);
  }

  // One frame: its header and its payload, sent as they lie (no copy into one buffer).
  absl::Status SendFrame(std::string_view header, std::string_view payload = {}) {
    absl::Status s;
    {
      MutexLock lock(send_mu_);
      s = SendAll(header, payload);
    }
    if (!s.ok()) Fail(s);
    return s;
  }

  // Waits until ready(call) holds (under mu_), reading the socket for everyone while no one
  // else does.
  template <typename Ready>
  absl::Status Wait(const std::shared_ptr<PendingCall>& call, Clock::time_point deadline, Ready ready) {
    MutexLock lock(mu_);
    absl::Status result;
    for (;;) {
      if (ready(*call)) break;
      if (Clock::now() >= deadline) {
        result = absl::DeadlineExceededError(kelp::StrCat(address_, ": no reply within the deadline"));
        break;
      }
      if (!reading_) {
        reading_ = true;
        call->reading = true;
        // Only a call alone on the connection polls: with others in flight, a reply wakes
        // the reader anyway, and the CPU is wanted elsewhere.
        const Clock::time_point poll_until =
            calls_.size() == 1 ? call->poll_until : Clock::time_point{};
        lock.Unlock();
        bool caught = false;
        absl::Status s = ReadOnce(poll_until, &caught);
        lock.Lock();
        reading_ = false;
        call->reading = false;
        if (poll_until != Clock::time_point{}) call->polled = true;
        if (caught) call->caught = true;
        if (!s.ok()) FailLocked(s);
        continue;
      }
      call->waiting = true;
      call->cv.WaitUntil(lock, deadline);
      call->waiting = false;
    }
    // Someone else may need the socket read now.
    if (!reading_) {
      for (auto& [id, c] : calls_) {
        if (c->waiting && c != call) {
          c->cv.NotifyOne();
          break;
        }
      }
    }
    return result;
  }

  void Fail(const absl::Status& s) {
    MutexLock lock(mu_);
    FailLocked(s);
  }

  template <typename Fn>
  void WithLock(Fn&& fn) {
    MutexLock lock(mu_);
    fn();
  }

  const std::string& address() const { return address_; }

 private:
  absl::Status SendAll(std::string_view data, std::string_view more = {}) {
    if (ssl_ != nullptr) {
      RETURN_IF_ERROR(SendAllTls(data));
      return SendAllTls(more);
    }
    while (!data.empty() || !more.empty()) {
      iovec iov[2];
      int parts = 0;
      for (std::string_view part : {data, more}) {
        if (!part.empty()) iov[parts++] = iovec{const_cast<char*>(part.data()), part.size()};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(parts);
      ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Unavailable(address_, kelp::StrCat("send: ", strerror(errno == EAGAIN ? ETIMEDOUT : errno)));
      }
      size_t sent = static_cast<size_t>(n), from_data = std::min(sent, data.size());
      data.remove_prefix(from_data);
      more.remove_prefix(sent - from_data);
    }
    return absl::OkStatus();
  }

  // The same through TLS; a server that takes nothing for as long as the plain socket's
  // SO_SNDTIMEO (30 s) is taken for dead, as there.
  absl::Status SendAllTls(std::string_view data) {
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!data.empty()) {
      int n, e = SSL_ERROR_NONE;
      std::string why;
      {
        MutexLock lock(ssl_mu_);
        ERR_clear_error();
        n = SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
        if (n <= 0) {
          e = SSL_get_error(ssl_, n);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) why = TlsFailure(ssl_, n);
        }
      }
      if (n > 0) {
        data.remove_prefix(n);
        continue;
      }
      if (!why.empty()) return Unavailable(address_, kelp::StrCat("send: ", why));
      if (RemainingMs(deadline) == 0) return Unavailable(address_, kelp::StrCat("send: ", strerror(ETIMEDOUT)));
      pollfd p{fd_, static_cast<short>(e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN), 0};
      poll(&p, 1, kRecvSliceMs);
    }
    return absl::OkStatus();
  }

  // One recv() into the read buffer; OK when it timed out empty. Before it sleeps, it polls
  // the socket until poll_until (if that is still ahead; *caught: bytes came meanwhile).
  absl::Status RecvSome(Clock::time_point poll_until = {}, bool* caught = nullptr) {
    if (rbuf_.size() < rlen_ + kReadChunk) rbuf_.resize(rlen_ + kReadChunk);
    if (ssl_ != nullptr) {
      AboutToBlock();
      return RecvSomeTls();
    }
    if (const Clock::time_point now = Clock::now(); poll_until > now) {
      const bool readable =
          BusyPoll(fd_, std::chrono::duration_cast<std::chrono::microseconds>(poll_until - now));
      if (caught != nullptr) *caught = readable;
    }
    AwaitReadable(fd_, kRecvSliceMs);  // a lent thread keeps its lender's work in view
    ssize_t n = recv(fd_, rbuf_.data() + rlen_, rbuf_.size() - rlen_, 0);
    if (n > 0) {
      rlen_ += n;
      return absl::OkStatus();
    }
    if (n == 0) return Unavailable(address_, "the server closed the connection");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return absl::OkStatus();
    return Unavailable(address_, kelp::StrCat("recv: ", strerror(errno)));
  }

  // The same through TLS: what OpenSSL has, else what arrives within one slice (the wait is a
  // poll() outside ssl_mu_, so senders are never held up by a reader).
  absl::Status RecvSomeTls() {
    bool polled = false;
    size_t got = 0;
    while (rbuf_.size() - rlen_ > 0) {
      int n, e = SSL_ERROR_NONE;
      std::string why;
      {
        MutexLock lock(ssl_mu_);
        ERR_clear_error();
        n = SSL_read(ssl_, rbuf_.data() + rlen_, static_cast<int>(rbuf_.size() - rlen_));
        if (n <= 0) {
          e = SSL_get_error(ssl_, n);
          if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) why = TlsFailure(ssl_, n);
        }
      }
      if (n > 0) {
        rlen_ += n;
        got += n;
        continue;
      }
      if (!why.empty()) return Unavailable(address_, why);
      if (got > 0 || polled) return absl::OkStatus();
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, kRecvSliceMs);
      polled = true;
    }
    return absl::OkStatus();
  }

  // Reads what arrives within one slice and hands every whole frame to its call. Runs without
  // mu_, by the one reader.
  absl::Status ReadOnce(Clock::time_point poll_until = {}, bool* caught = nullptr) {
    const size_t had = rlen_;
    bool polled_bytes = false;
    RETURN_IF_ERROR(RecvSome(poll_until, &polled_bytes));
    if (caught != nullptr) *caught = polled_bytes && rlen_ > had;
    if (rlen_ > had) last_heard_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    size_t pos = 0;
    std::vector<std::pair<FrameHeader, std::string_view>> frames;
    for (;;) {
      FrameHeader h;
      ASSIGN_OR_RETURN(size_t size, DecodeFrame(std::string_view(rbuf_.data() + pos, rlen_ - pos), max_payload_, &h));
      if (size == 0) break;
      frames.emplace_back(h, std::string_view(rbuf_.data() + pos + kFrameHeaderSize, h.payload_size));
      pos += size;
    }
    if (!frames.empty()) {
      MutexLock lock(mu_);
      for (auto& [h, payload] : frames) RETURN_IF_ERROR(DeliverLocked(h, payload));
    }
    if (pos > 0) {
      std::memmove(rbuf_.data(), rbuf_.data() + pos, rlen_ - pos);
      rlen_ -= pos;
    }
    if (rbuf_.size() > (4 << 20) && rlen_ < kReadChunk) {
      rbuf_.resize(kReadChunk);
      rbuf_.shrink_to_fit();
    }
    return absl::OkStatus();
  }

  absl::Status DeliverLocked(const FrameHeader& h, std::string_view payload) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = calls_.find(h.id);
    if (it == calls_.end()) return absl::OkStatus();  // a call that gave up
    PendingCall& c = *it->second;
    switch (h.type) {
      case FrameType::kReply:
        c.reply.assign(payload);
        c.done = true;
        break;
      case FrameType::kError:
        c.status = DecodeStatus(payload);
        c.done = true;
        break;
      case FrameType::kStream:
        if (!c.stream) return Unavailable(address_, "a stream message for a unary call");
        if (c.items.size() >= kMaxStreamBacklog) {
          c.status = absl::ResourceExhaustedError("stream consumer fell behind");
          c.done = true;
          break;
        }
        c.items.emplace_back(payload);
        break;
      default:
        return Unavailable(address_, kelp::StrCat("unexpected frame type ", static_cast<int>(h.type)));
    }
    if (c.done) calls_.erase(it);
    c.cv.NotifyOne();
    return absl::OkStatus();
  }

  void FailLocked(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (broken_.ok()) {
      broken_ = s.code() == absl::StatusCode::kUnavailable ? s : Unavailable(address_, ToStd(s.message()));
      shutdown(fd_, SHUT_RDWR);
    }
    for (auto& [id, c] : calls_) {
      if (!c->done) {
        c->done = true;
        c->status = broken_;
      }
      c->cv.NotifyOne();
    }
    calls_.clear();
  }

  const std::string address_;
  const int fd_;
  const size_t max_payload_;
  // With TLS (set by StartTls before the connection is shared): SSL_read by the one reader
  // and SSL_write by a sender may not run at once on one SSL, so each takes ssl_mu_, which is
  // taken last (after send_mu_ or with reading_ set) and never held across a wait.
  SSL* ssl_ = nullptr;
  Mutex ssl_mu_;
  Mutex send_mu_ ABSL_ACQUIRED_BEFORE(ssl_mu_);  // never taken while holding mu_, nor mu_ under it
  Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, std::shared_ptr<PendingCall>> calls_ ABSL_GUARDED_BY(mu_);
  // The reader's buffer: touched only by the thread that set reading_ (and Upgrade, before
  // the connection is shared).
  std::string rbuf_;
  // When ReadOnce last got bytes (steady clock, ns); 0 before any.
  std::atomic<int64_t> last_heard_ns_{0};
  size_t rlen_ = 0;
};

// ---- ClientStream ----

ClientStream::ClientStream(std::shared_ptr<ClientConn> conn, std::shared_ptr<PendingCall> call, uint64_t id)
    : conn_(std::move(conn)), call_(std::move(call)), id_(id) {}

ClientStream::~ClientStream() { Cancel(); }

bool ClientStream::Next(google::protobuf::MessageLite* message) {
  auto far = Clock::now() + std::chrono::hours(24 * 365);
  for (;;) {
    absl::Status s = conn_->Wait(call_, far, [](const PendingCall& c) { return !c.items.empty() || c.done; });
    (void)s;
    std::string item;
    {
      // Wait returned with the call ready; take the item under the connection's lock again.
      bool have = false;
      conn_->WithLock([&] {
        if (!call_->items.empty()) {
          item = std::move(call_->items.front());
          call_->items.pop_front();
          have = true;
        } else if (call_->done) {
          end_ = call_->status;
        }
      });
      if (!have) {
        if (call_->done) return false;
        continue;
      }
    }
    if (!message->ParseFromString(item)) {
      end_ = absl::InternalError("malformed stream message");
      Cancel();
      return false;
    }
    return true;
  }
}

absl::Status ClientStream::Finish() { return end_; }

bool ClientStream::blocked() {
  bool b = false;
  conn_->WithLock([&] { b = call_->waiting || call_->reading; });
  return b;
}

void ClientStream::Cancel() {
  bool send = false;
  conn_->WithLock([&] {
    if (!call_->done) {
      call_->done = true;
      call_->status = absl::CancelledError("stream cancelled");
      call_->cv.NotifyAll();
      send = true;
    }
  });
  conn_->Unregister(id_);
  if (send) {
    std::string frame;
    AppendFrameHeader(&frame, FrameType::kCancel, 0, id_, 0);
    conn_->SendFrame(frame).IgnoreError();
  }
}

// ---- Channel ----

Channel::Channel(std::string address, Options options)
    : address_(std::move(address)), opts_(options) {
  if (opts_.reply_poll.count() > 0 && !opts_.tls) {
    reply_us_ = std::make_unique<std::atomic<uint32_t>[]>(kPolledMethods);
    auto& reg = MetricsRegistry::Default();
    const char* help =
        "metadata calls whose caller polled for the reply (reply_poll), by whether it came "
        "meanwhile";
    polls_caught_metric_ =
        reg.GetCounter("kelp_rpc_client_reply_polls_total", help, {{"result", "caught"}});
    polls_missed_metric_ =
        reg.GetCounter("kelp_rpc_client_reply_polls_total", help, {{"result", "missed"}});
  }
}

Channel::~Channel() {
  MutexLock lock(mu_);
  if (conn_) conn_->Fail(absl::CancelledError("channel closed"));
}

uint64_t Channel::connects() const {
  MutexLock lock(mu_);
  return connects_;
}

absl::StatusOr<std::shared_ptr<ClientConn>> Channel::Conn(Clock::time_point deadline) {
  {
    MutexLock lock(mu_);
    if (conn_ && !conn_->broken()) return conn_;
  }
  MutexLock connect_lock(connect_mu_);
  {
    MutexLock lock(mu_);
    if (conn_ && !conn_->broken()) return conn_;
  }
  auto connect_deadline = std::min(deadline, Clock::now() + std::chrono::milliseconds(opts_.connect_timeout_ms));
  ASSIGN_OR_RETURN(std::shared_ptr<ClientConn> conn, NewConn(connect_deadline));
  MutexLock lock(mu_);
  conn_ = conn;
  ++connects_;
  return conn;
}

absl::StatusOr<std::shared_ptr<ClientConn>> Channel::NewConn(Clock::time_point deadline) {
  AboutToBlock();
  ASSIGN_OR_RETURN(int fd, Dial(address_, deadline));
  auto conn = std::make_shared<ClientConn>(address_, fd, opts_.max_payload);
  RETURN_IF_ERROR(conn->Upgrade(deadline, opts_.upgrade_headers ? opts_.upgrade_headers() : std::string()));
  if (opts_.tls) {
    std::string host, port;
    RETURN_IF_ERROR(SplitHostPort(address_, &host, &port));
    RETURN_IF_ERROR(conn->StartTls(opts_.tls.get(), host, deadline));
  }
  return conn;
}

absl::Status Channel::Connect(std::chrono::milliseconds timeout) { return Conn(Clock::now() + timeout).status(); }

void Channel::DropIfClosed(std::chrono::milliseconds unless_heard_within) {
  std::shared_ptr<ClientConn> conn;
  {
    MutexLock lock(mu_);
    conn = conn_;
  }
  if (!conn) return;
  if (unless_heard_within.count() > 0 && conn->HeardWithin(unless_heard_within)) return;
  conn->FailIfClosed();
}

absl::StatusOr<std::string> Channel::CallRaw(uint16_t method, std::string_view request,
                                             std::chrono::milliseconds timeout) {
  const Clock::time_point start = Clock::now();
  auto deadline = start + timeout;
  ASSIGN_OR_RETURN(std::shared_ptr<ClientConn> conn, Conn(deadline));
  auto call = std::make_shared<PendingCall>();
  std::atomic<uint32_t>* reply_us =
      reply_us_ && method < kPolledMethods ? &reply_us_[method] : nullptr;
  // Polled for: a method whose replies lately took at most twice the budget, for three times
  // as long as they took (most replies come within it, and a quick method's caller soon gives
  // up on one that does not), within the budget; a method not seen yet for the whole budget, to
  // learn how long it takes.
  if (reply_us != nullptr) {
    const int64_t avg = reply_us->load(std::memory_order_relaxed),
                  budget = opts_.reply_poll.count();
    if (avg <= 2 * budget) {
      call->poll_until =
          start + std::chrono::microseconds(avg == 0 ? budget : std::min(budget, avg * 3));
    }
  }
  ASSIGN_OR_RETURN(uint64_t id, conn->Register(call));
  char header[kFrameHeaderSize];
  EncodeFrameHeader(header, FrameType::kRequest, method, id, request.size());
  if (absl::Status s = conn->SendFrame(std::string_view(header, sizeof header), request); !s.ok()) {
    conn->Unregister(id);
    return s;
  }
  absl::Status s = conn->Wait(call, deadline, [](const PendingCall& c) { return c.done; });
  if (!s.ok()) {
    conn->Unregister(id);
    return s;
  }
  if (reply_us != nullptr) {
    // Only this thread touches the call's poll fields now (Wait set them under the lock).
    if (call->polled) {
      reply_polls_.fetch_add(1, std::memory_order_relaxed);
      if (call->caught) replies_polled_.fetch_add(1, std::memory_order_relaxed);
      (call->caught ? polls_caught_metric_ : polls_missed_metric_)->Inc();
    }
    const auto took =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    const uint32_t now_us = static_cast<uint32_t>(std::clamp<int64_t>(took, 1, UINT32_MAX));
    const uint32_t avg = reply_us->load(std::memory_order_relaxed);
    reply_us->store(avg == 0 ? now_us : static_cast<uint32_t>((uint64_t{avg} * 7 + now_us) / 8),
                    std::memory_order_relaxed);
  }
  if (!call->status.ok()) return call->status;
  return std::move(call->reply);
}

absl::Status Channel::Call(uint16_t method, const google::protobuf::MessageLite& req,
                           google::protobuf::MessageLite* resp, std::chrono::milliseconds timeout) {
  std::string payload;
  if (!req.SerializeToString(&payload)) return absl::InvalidArgumentError("cannot serialize the request");
  return Call(method, SerializedRequest{std::move(payload)}, resp, timeout);
}

absl::Status Channel::Call(uint16_t method, const SerializedRequest& req, google::protobuf::MessageLite* resp,
                           std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(std::string reply, CallRaw(method, req.bytes, timeout));
  if (!resp->ParseFromString(reply)) return absl::InternalError(kelp::StrCat(address_, ": malformed reply"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ClientStream>> Channel::OpenStream(uint16_t method,
                                                                  const google::protobuf::MessageLite& req,
                                                                  std::chrono::milliseconds connect_timeout) {
  // A stream gets a connection of its own: its reader waits for messages for as long as the
  // stream lives, and must not stand between the unary callers and their replies.
  ASSIGN_OR_RETURN(std::shared_ptr<ClientConn> conn, NewConn(Clock::now() + connect_timeout));
  auto call = std::make_shared<PendingCall>();
  call->stream = true;
  ASSIGN_OR_RETURN(uint64_t id, conn->Register(call));
  std::string payload;
  if (!req.SerializeToString(&payload)) return absl::InvalidArgumentError("cannot serialize the request");
  char header[kFrameHeaderSize];
  EncodeFrameHeader(header, FrameType::kRequest, method, id, payload.size());
  RETURN_IF_ERROR(conn->SendFrame(std::string_view(header, sizeof header), payload));
  return std::unique_ptr<ClientStream>(new ClientStream(conn, call, id));
}

}  // namespace kelp::rpc
