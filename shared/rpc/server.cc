#include "shared/rpc/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shared/log.h"
#include "shared/rpc/tls.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::rpc {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// Bytes read from one connection per wake-up before the loop serves the others.
constexpr size_t kReadBudget = 1 << 20;
constexpr std::string_view kSwitching =
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: kelp-rpc/1\r\n\r\n";

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A frame whose header is patched in once the payload behind it is known.
std::string NewFrame() { return std::string(kFrameHeaderSize, '\0'); }
void SealFrame(std::string& frame, FrameType type, uint64_t id) {
  EncodeFrameHeader(frame.data(), type, 0, id, frame.size() - kFrameHeaderSize);
}
std::string ErrorFrame(uint64_t id, const absl::Status& s) {
  std::string f = NewFrame();
  f += EncodeStatus(s);
  SealFrame(f, FrameType::kError, id);
  return f;
}

}  // namespace

struct StreamControl {
  std::atomic<bool> cancelled{false};
};

struct Server::Loop {
  int epfd = -1;
  int evfd = -1;
  std::thread thread;
  std::unordered_map<int, std::shared_ptr<ServerConn>> conns;  // loop thread only
  Mutex mu;  // a leaf: nothing is taken under it
  struct Incoming {
    int fd;
    std::string initial;
    bool needs_head;
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

// ---- Service ----

void Service::Add(uint16_t method, Method m) { methods_[method] = std::move(m); }

const Service::Method* Service::Find(uint16_t method) const {
  auto it = methods_.find(method);
  return it == methods_.end() ? nullptr : &it->second;
}

// ---- StreamWriter ----

bool StreamWriter::Write(const google::protobuf::MessageLite& message, bool flush) {
  if (control_->cancelled.load()) return false;
  size_t limit = conn_->server()->opts_.max_pending_output;
  if (conn_->pending_output() > limit && !conn_->WaitOutputBelow(limit / 2, *control_)) return false;
  if (control_->cancelled.load()) return false;
  frame_ = NewFrame();
  if (!message.AppendToString(&frame_)) return false;
  SealFrame(frame_, FrameType::kStream, id_);
  if (flush) return conn_->SendNow(frame_);
  conn_->Queue(frame_);
  return !conn_->closed();
}

bool StreamWriter::Flush() { return !control_->cancelled.load() && conn_->FlushNow(); }

bool StreamWriter::cancelled() const { return control_->cancelled.load() || conn_->closed(); }

// ---- Server ----

Server::Server(Options options, Service* service) : opts_(std::move(options)), service_(service) {
  if (opts_.loop_threads <= 0) opts_.loop_threads = std::max(1u, std::thread::hardware_concurrency());
  auto& reg = MetricsRegistry::Default();
  conn_gauge_ = reg.GetGauge(opts_.metric_prefix + "_connections", "Open RPC connections.");
  bad_frames_ = reg.GetCounter(opts_.metric_prefix + "_malformed_frames_total",
                               "RPC connections closed for a malformed frame or upgrade request.");
  tls_refused_ = reg.GetCounter(opts_.metric_prefix + "_tls_refused_total",
                                "RPC connections closed for a failed TLS handshake (no or a wrong certificate).");
  if (opts_.tls) IgnoreSigpipe();
  for (auto& [id, m] : service_->methods_) {
    Labels l = {{"method", m.name}};
    m.latency = reg.GetHistogram(opts_.metric_prefix + "_seconds", "RPC handler latency.", l);
    m.errors = reg.GetCounter(opts_.metric_prefix + "_errors_total", "RPC calls that failed.", l);
  }
}

Server::~Server() { Stop(); }

absl::Status Server::Start() {
  workers_ = std::make_unique<ThreadPool>(opts_.name + "-w", opts_.worker_threads, opts_.worker_queue);
  for (int i = 0; i < opts_.loop_threads; ++i) {
    auto loop = std::make_unique<Loop>();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->epfd < 0 || loop->evfd < 0) return ErrnoStatus("rpc server: epoll");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = loop->evfd;
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->evfd, &ev);
    loops_.push_back(std::move(loop));
  }
  for (size_t i = 0; i < loops_.size(); ++i) {
    Loop* loop = loops_[i].get();
    loop->thread = std::thread([this, loop, i] {
      std::string tname = kelp::StrCat(opts_.name, "-l", i).substr(0, 15);
      pthread_setname_np(pthread_self(), tname.c_str());
      RunLoop(loop);
    });
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Server::Listen(const std::string& ip, int port) {
  if (loops_.empty()) return absl::FailedPreconditionError("rpc server: Listen before Start");
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("rpc server: socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(kelp::StrCat("bad listen address ", ip));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 || listen(fd, 1024) < 0) {
    absl::Status s = ErrnoStatus(kelp::StrCat("rpc server: listen on ", ip, ":", port));
    close(fd);
    return s;
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  listen_fd_ = fd;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(loops_[0]->epfd, EPOLL_CTL_ADD, fd, &ev);
  return static_cast<int>(ntohs(addr.sin_port));
}

void Server::Adopt(int fd, std::string initial) {
  if (stopping_.load() || loops_.empty()) {
    close(fd);
    return;
  }
  Loop* loop = loops_[next_loop_.fetch_add(1) % loops_.size()].get();
  {
    MutexLock lock(loop->mu);
    loop->incoming.push_back({fd, std::move(initial), false});
  }
  uint64_t one = 1;
  (void)!write(loop->evfd, &one, sizeof one);
}

void Server::Stop() {
  if (stopping_.exchange(true)) return;
  {
    MutexLock lock(streams_mu_);
    for (auto& s : streams_) s.control->cancelled = true;
  }
  for (auto& loop : loops_) {
    uint64_t one = 1;
    (void)!write(loop->evfd, &one, sizeof one);
  }
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
  }
  if (workers_) workers_->Stop();
  std::list<StreamThread> streams;
  {
    MutexLock lock(streams_mu_);
    streams.swap(streams_);
  }
  for (auto& s : streams) {
    if (s.thread.joinable()) s.thread.join();
  }
  for (auto& loop : loops_) {
    {
      MutexLock lock(loop->mu);
      for (auto& in : loop->incoming) close(in.fd);
      loop->incoming.clear();
    }
    close(loop->epfd);
    close(loop->evfd);
  }
  loops_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void Server::AddConn(Loop* loop, int fd, std::string initial, bool needs_head) {
  SetNonBlocking(fd);
  SetNoDelay(fd);
  auto conn = std::make_shared<ServerConn>(this, loop, fd);
  conn->needs_head = needs_head;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    spdlog::warn("{}: epoll_ctl: {}", opts_.name, strerror(errno));
    return;  // conn closes fd
  }
  loop->conns[fd] = conn;
  connections_.fetch_add(1);
  conn_gauge_->Add(1);
  conn->AppendInput(initial);
  if (!needs_head && !SwitchProtocols(conn)) {
    CloseConn(loop, conn);
    return;
  }
  OnReadable(loop, conn);
}

bool Server::SwitchProtocols(const std::shared_ptr<ServerConn>& conn) {
  conn->Queue(kSwitching);
  if (!opts_.tls) return true;  // the 101 joins the first replies
  // The 101 goes in the clear, alone: the client starts its handshake once it has read it,
  // so nothing may follow it before the handshake (a client that sent more is refused).
  if (!conn->Flush() || conn->pending_output() != 0 || !conn->input().empty() || !conn->StartTls(opts_.tls.get())) {
    tls_refused_->Inc();
    return false;
  }
  return ContinueHandshake(conn);
}

bool Server::ContinueHandshake(const std::shared_ptr<ServerConn>& conn) {
  std::string why;
  if (conn->Handshake(&why)) return true;
  tls_refused_->Inc();
  spdlog::warn("{}: TLS handshake refused: {}", opts_.name, why);
  return false;
}

void Server::RunLoop(Loop* loop) {
  epoll_event events[128];
  while (!stopping_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(loop->epfd, events, 128, 1000);
    if (n < 0 && errno != EINTR) {
      spdlog::error("{}: epoll_wait: {}", opts_.name, strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == loop->evfd) {
        uint64_t v;
        (void)!read(loop->evfd, &v, sizeof v);
        std::vector<Loop::Incoming> incoming;
        {
          MutexLock lock(loop->mu);
          incoming.swap(loop->incoming);
        }
        for (auto& in : incoming) AddConn(loop, in.fd, std::move(in.initial), in.needs_head);
        continue;
      }
      if (fd == listen_fd_ && listen_fd_ >= 0) {
        for (;;) {
          int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c < 0) break;
          Loop* target = loops_[next_loop_.fetch_add(1) % loops_.size()].get();
          if (target == loop) {
            AddConn(loop, c, "", true);
          } else {
            {
              MutexLock lock(target->mu);
              target->incoming.push_back({c, "", true});
            }
            uint64_t one = 1;
            (void)!write(target->evfd, &one, sizeof one);
          }
        }
        continue;
      }
      auto it = loop->conns.find(fd);
      if (it == loop->conns.end()) continue;
      std::shared_ptr<ServerConn> conn = it->second;
      uint32_t e = events[i].events;
      if (e & EPOLLOUT) OnWritable(loop, conn);
      if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && !conn->closed()) OnReadable(loop, conn);
      if (conn->closed()) CloseConn(loop, conn);
    }
  }
  for (auto& [fd, conn] : loop->conns) {
    conn->Close();
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, nullptr);
    connections_.fetch_sub(1);
    conn_gauge_->Add(-1);
  }
  loop->conns.clear();
}

void Server::CloseConn(Loop* loop, const std::shared_ptr<ServerConn>& conn) {
  auto it = loop->conns.find(conn->fd());
  if (it == loop->conns.end() || it->second != conn) return;
  conn->Close();
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, conn->fd(), nullptr);
  loop->conns.erase(it);
  connections_.fetch_sub(1);
  conn_gauge_->Add(-1);
}

void Server::OnReadable(Loop* loop, const std::shared_ptr<ServerConn>& conn) {
  if (conn->handshaking()) {
    if (!ContinueHandshake(conn)) {
      CloseConn(loop, conn);
      return;
    }
    if (conn->handshaking()) return;
  }
  bool alive = conn->reading_paused || conn->ReadAvailable();
  bool ok = true;
  if (conn->needs_head) ok = ProcessUpgradeHead(conn);
  if (ok && !conn->needs_head) ok = ProcessFrames(conn);
  if (!conn->Flush()) ok = false;
  if (ok && alive) {
    bool pause = conn->pending_output() > opts_.max_pending_output;
    if (pause != conn->reading_paused.load()) {
      conn->reading_paused = pause;
      conn->UpdateInterest();
    }
    return;
  }
  if (!alive && ok) conn->Flush();  // the client half-closed: answer what it sent
  CloseConn(loop, conn);
}

void Server::OnWritable(Loop* loop, const std::shared_ptr<ServerConn>& conn) {
  if (!conn->OnWritable()) return;
  if (conn->handshaking()) {
    if (!ContinueHandshake(conn)) conn->Close();
    return;
  }
  if (conn->reading_paused && conn->pending_output() <= opts_.max_pending_output / 2) {
    conn->reading_paused = false;
    conn->UpdateInterest();
    if (!conn->input().empty()) OnReadable(loop, conn);
  }
}

bool Server::ProcessUpgradeHead(const std::shared_ptr<ServerConn>& conn) {
  absl::StatusOr<size_t> r = ParseUpgradeRequest(conn->input());
  if (!r.ok()) {
    bad_frames_->Inc();
    std::string body = kelp::StrCat(r.status().message(), "\n");
    conn->Queue(kelp::StrCat("HTTP/1.1 400 Bad Request\r\nContent-Length: ", body.size(),
                             "\r\nConnection: close\r\n\r\n", body));
    conn->Flush();
    return false;
  }
  if (*r == 0) return true;
  conn->Consume(*r);
  conn->needs_head = false;
  return SwitchProtocols(conn);
}

bool Server::ProcessFrames(const std::shared_ptr<ServerConn>& conn) {
  while (conn->pending_output() <= opts_.max_pending_output) {
    std::string_view in = conn->input();
    FrameHeader h;
    auto size = DecodeFrame(in, opts_.max_payload, &h);
    if (!size.ok()) {
      bad_frames_->Inc();
      spdlog::warn("{}: closing a connection: {}", opts_.name, size.status().message());
      return false;
    }
    if (*size == 0) return true;
    std::string_view payload = in.substr(kFrameHeaderSize, h.payload_size);
    switch (h.type) {
      case FrameType::kRequest: {
        const Service::Method* m = service_->Find(h.method);
        if (m == nullptr) {
          conn->Queue(ErrorFrame(h.id, absl::UnimplementedError(kelp::StrCat("no rpc method ", h.method))));
          break;
        }
        std::shared_ptr<google::protobuf::MessageLite> req = m->new_request();
        if (!req->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          m->errors->Inc();
          conn->Queue(ErrorFrame(h.id, absl::InvalidArgumentError(kelp::StrCat("malformed ", m->name, " request"))));
          break;
        }
        if (m->stream) {
          StartStream(conn, *m, h.id, std::move(req));
          break;
        }
        Exec exec = m->exec ? m->exec(*req) : Exec::kInline;
        if (exec == Exec::kInline) {
          RunCall(conn, *m, h.id, *req, true);
          break;
        }
        uint64_t id = h.id;
        bool queued = workers_->TrySubmit([this, conn, m, id, req] { RunCall(conn, *m, id, *req, false); });
        if (!queued) {
          m->errors->Inc();
          conn->Queue(ErrorFrame(h.id, absl::UnavailableError(kelp::StrCat(opts_.name, " is overloaded"))));
        }
        break;
      }
      case FrameType::kCancel:
        conn->CancelStream(h.id);
        break;
      default:
        bad_frames_->Inc();
        spdlog::warn("{}: closing a connection that sent a frame of type {}", opts_.name, static_cast<int>(h.type));
        return false;
    }
    conn->Consume(*size);
  }
  return true;
}

void Server::RunCall(const std::shared_ptr<ServerConn>& conn, const Service::Method& m, uint64_t id,
                     const google::protobuf::MessageLite& req, bool on_loop) {
  auto start = std::chrono::steady_clock::now();
  std::string frame = NewFrame();
  absl::Status s;
  try {
    s = m.unary(req, &frame);
  } catch (const std::exception& e) {
    s = absl::InternalError(kelp::StrCat(m.name, ": ", e.what()));
  }
  if (s.ok()) {
    SealFrame(frame, FrameType::kReply, id);
  } else {
    m.errors->Inc();
    frame = ErrorFrame(id, s);
  }
  m.latency->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  // On a loop thread the reply joins the others of this read; elsewhere it goes now.
  if (on_loop) {
    conn->Queue(frame);
  } else {
    conn->SendNow(frame);
  }
}

void Server::StartStream(const std::shared_ptr<ServerConn>& conn, const Service::Method& m, uint64_t id,
                         std::shared_ptr<google::protobuf::MessageLite> req) {
  ReapStreams();
  auto control = std::make_shared<StreamControl>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  conn->AddStream(id, control);
  MutexLock lock(streams_mu_);
  if (stopping_.load()) {
    conn->Queue(ErrorFrame(id, absl::UnavailableError("server is stopping")));
    conn->RemoveStream(id);
    return;
  }
  StreamThread st;
  st.control = control;
  st.done = done;
  st.thread = std::thread([this, conn, &m, id, req, control, done] {
    pthread_setname_np(pthread_self(), kelp::StrCat(opts_.name, "-s").substr(0, 15).c_str());
    StreamWriter w(conn, control, id);
    absl::Status s;
    try {
      s = m.stream(*req, w);
    } catch (const std::exception& e) {
      s = absl::InternalError(kelp::StrCat(m.name, ": ", e.what()));
    }
    std::string frame;
    if (s.ok()) {
      frame = NewFrame();
      SealFrame(frame, FrameType::kReply, id);
    } else {
      if (!control->cancelled.load()) m.errors->Inc();
      frame = ErrorFrame(id, s);
    }
    conn->SendNow(frame);
    conn->RemoveStream(id);
    done->store(true);
  });
  streams_.push_back(std::move(st));
}

void Server::ReapStreams() {
  std::list<StreamThread> finished;
  {
    MutexLock lock(streams_mu_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (it->done->load()) {
        finished.splice(finished.end(), streams_, it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : finished) s.thread.join();
}

}  // namespace kelp::rpc
