#include "shared/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "shared/http/http_conn.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::http {
namespace {

constexpr size_t kMaxDrainBytes = 1 << 20;  // unread body we skip to keep a connection alive
constexpr int64_t kSweepIntervalMs = 500;
// A connection still receiving its request head after this long may be evicted for a new one
// when the server is full (a client sends a head in well under a second).
constexpr int64_t kEvictableHeadMs = 1000;

void SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Idle: between requests, nothing buffered either way.
bool Idle(const Conn* c) { return !c->have_head_ && c->buffered() == 0 && c->out_empty(); }

}  // namespace

struct HttpServer::Loop {
  int epfd = -1;
  int evfd = -1;
  std::thread thread;
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  int64_t last_sweep_ms = 0;
  bool accepting = true;  // false: the listening socket is out of this loop's epoll set
  Mutex mu;
  std::vector<Conn*> returned ABSL_GUARDED_BY(mu);
};

HttpServer::HttpServer(Options options, Handler* handler) : opts_(std::move(options)), handler_(handler) {
  if (opts_.loop_threads <= 0) opts_.loop_threads = std::max(1u, std::thread::hardware_concurrency());
  auto& m = MetricsRegistry::Default();
  const Labels server{{"server", opts_.name}};
  requests_ = m.GetCounter("kelp_http_requests_total", "HTTP requests answered.", server);
  inline_requests_ = m.GetCounter("kelp_http_inline_requests_total", "HTTP requests answered on the event loop.", server);
  bad_requests_ = m.GetCounter("kelp_http_malformed_requests_total", "HTTP requests rejected by the parser.", server);
  for (int c = 1; c <= 5; ++c) {
    responses_[c] = m.GetCounter("kelp_http_responses_total", "HTTP responses by class (4xx: the client's fault).",
                                 {{"server", opts_.name}, {"class", kelp::StrCat(c, "xx")}});
  }
  responses_[0] = responses_[5];
  timeouts_ = m.GetCounter("kelp_http_timeouts_total",
                           "Connections closed for a slow request head, a slow body or an idle keep-alive.", server);
  evicted_ = m.GetCounter("kelp_http_connections_evicted_total",
                          "Connections closed to make room for a new one at -max connections.", server);
  refused_ = m.GetCounter("kelp_http_connections_refused_total",
                          "New connections closed at once: at the limit with nothing to evict, or out of descriptors.",
                          server);
  open_ = m.GetGauge("kelp_http_connections", "Open HTTP connections.", server);
  RegisterProcessMetrics();
}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return ErrnoStatus("socket");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(opts_.port);
  if (inet_pton(AF_INET, opts_.ip.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(kelp::StrCat("bad listen address ", opts_.ip));
  }
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
    return ErrnoStatus(kelp::StrCat("bind ", opts_.ip, ":", opts_.port));
  }
  if (listen(listen_fd_, 4096) < 0) return ErrnoStatus("listen");
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  {
    MutexLock lock(spare_mu_);
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  }

  workers_ = std::make_unique<ThreadPool>(opts_.name + "-w", opts_.worker_threads, opts_.worker_queue);
  for (int i = 0; i < opts_.loop_threads; ++i) {
    auto loop = std::make_unique<Loop>();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ArmListener(loop.get());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = loop.get();
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

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (loops_.empty()) {
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    CloseSpare();
    return;
  }
  {
    MutexLock lock(blocking_mu_);
    for (int fd : blocking_fds_) shutdown(fd, SHUT_RDWR);
  }
  if (workers_) workers_->Stop();
  for (auto& loop : loops_) {
    uint64_t one = 1;
    (void)!write(loop->evfd, &one, sizeof one);
  }
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
    open_->Add(-static_cast<int64_t>(loop->conns.size()));
    connections_.fetch_sub(static_cast<int>(loop->conns.size()));
    loop->conns.clear();
    close(loop->epfd);
    close(loop->evfd);
  }
  loops_.clear();
  close(listen_fd_);
  listen_fd_ = -1;
  CloseSpare();
}

void HttpServer::RunLoop(Loop* loop) {
  epoll_event events[256];
  while (!stopping_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(loop->epfd, events, 256, kSweepIntervalMs);
    if (n < 0 && errno != EINTR) {
      spdlog::error("{}: epoll_wait: {}", opts_.name, strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      void* ptr = events[i].data.ptr;
      if (ptr == nullptr) {
        Accept(loop);
        continue;
      }
      if (ptr == loop) {
        uint64_t v;
        (void)!read(loop->evfd, &v, sizeof v);
        std::vector<Conn*> back;
        {
          MutexLock lock(loop->mu);
          back.swap(loop->returned);
        }
        for (Conn* c : back) {
          c->on_worker_ = false;
          c->last_activity_ms_ = NowMs();
          if (c->want_close_ || stopping_) {
            CloseConn(loop, c);
            continue;
          }
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLRDHUP;
          ev.data.ptr = c;
          epoll_ctl(loop->epfd, EPOLL_CTL_ADD, c->fd(), &ev);
          ProcessInput(loop, c);
        }
        continue;
      }
      Conn* c = static_cast<Conn*>(ptr);
      uint32_t e = events[i].events;
      if (e & EPOLLOUT) {
        FlushOrArm(loop, c);
        continue;
      }
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        ssize_t r = c->ReadSome();
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          CloseConn(loop, c);
          continue;
        }
        if (r > 0) {
          c->last_activity_ms_ = NowMs();
          if (c->request_start_ms_ == 0) c->request_start_ms_ = c->last_activity_ms_;
        }
        ProcessInput(loop, c);
      }
    }
    int64_t now = NowMs();
    if (now - loop->last_sweep_ms >= kSweepIntervalMs) {
      loop->last_sweep_ms = now;
      Sweep(loop, now);
      if (!loop->accepting) ArmListener(loop);
    }
  }
}

void HttpServer::Sweep(Loop* loop, int64_t now) {
  std::vector<Conn*> expired;
  for (auto& [fd, conn] : loop->conns) {
    Conn* c = conn.get();
    if (c->on_worker_) continue;
    if (c->write_armed_) {
      if (now - c->last_activity_ms_ > opts_.io_timeout_ms) expired.push_back(c);  // not reading responses
    } else if (c->request_start_ms_ != 0 && (c->have_head_ || c->buffered() > 0)) {
      if (now - c->request_start_ms_ > opts_.request_timeout_ms) expired.push_back(c);  // slow head or inline body
    } else if (now - c->last_activity_ms_ > opts_.idle_timeout_ms) {
      expired.push_back(c);
    }
  }
  for (Conn* c : expired) {
    timeouts_->Inc();
    if (!c->write_armed_ && (c->have_head_ || c->buffered() > 0)) {
      EmitError(c, 408, "request not received in time");
      responses_[4]->Inc();
      c->FlushSome();
    }
    CloseConn(loop, c);
  }
}

bool HttpServer::EvictOne(Loop* loop, int64_t now) {
  Conn* victim = nullptr;
  int64_t best = INT64_MAX;
  for (auto& [fd, conn] : loop->conns) {
    Conn* c = conn.get();
    if (c->on_worker_ || c->write_armed_) continue;
    int64_t since;
    if (Idle(c)) {
      since = c->last_activity_ms_ - opts_.request_timeout_ms;  // idle ones go first
    } else if (c->request_start_ms_ != 0 && now - c->request_start_ms_ > kEvictableHeadMs && !c->have_head_) {
      since = c->request_start_ms_;
    } else {
      continue;
    }
    if (since < best) {
      best = since;
      victim = c;
    }
  }
  if (!victim) return false;
  evicted_->Inc();
  CloseConn(loop, victim);
  return true;
}

void HttpServer::Accept(Loop* loop) {
  for (int i = 0; i < 64; ++i) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: the pending connection would keep the (level-triggered) listening
        // socket readable and this loop spinning. Use the spare to accept and close it; with no
        // spare, leave the socket out of this loop's epoll set until the next sweep.
        if (RefuseWithSpare()) continue;
        epoll_ctl(loop->epfd, EPOLL_CTL_DEL, listen_fd_, nullptr);
        loop->accepting = false;
      }
      return;  // EAGAIN
    }
    int64_t now = NowMs();
    if (connections_.load() >= opts_.max_connections && !EvictOne(loop, now)) {
      refused_->Inc();
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
    auto conn = std::make_unique<Conn>(this, fd, kelp::StrCat(ip, ":", ntohs(addr.sin_port)), now);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = conn.get();
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) continue;
    connections_.fetch_add(1);
    open_->Add(1);
    loop->conns.emplace(fd, std::move(conn));
  }
}

void HttpServer::CloseSpare() {
  MutexLock lock(spare_mu_);
  if (spare_fd_ >= 0) close(spare_fd_);
  spare_fd_ = -1;
}

void HttpServer::ArmListener(Loop* loop) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.ptr = nullptr;  // the listening socket
  loop->accepting = epoll_ctl(loop->epfd, EPOLL_CTL_ADD, listen_fd_, &ev) == 0;
}

bool HttpServer::RefuseWithSpare() {
  MutexLock lock(spare_mu_);
  if (spare_fd_ < 0) spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);  // one may be free again
  if (spare_fd_ < 0) return false;
  close(spare_fd_);
  int drop = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  bool handled = drop >= 0 || errno == EAGAIN || errno == EWOULDBLOCK;  // another loop took it
  if (drop >= 0) {
    close(drop);
    refused_->Inc();
  }
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return handled;
}

void HttpServer::CloseConn(Loop* loop, Conn* conn) {
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, conn->fd(), nullptr);
  // Closing a socket with unread input makes the kernel send RST, which can destroy the
  // response still in flight to the client. Send FIN first and drain what is there.
  shutdown(conn->fd(), SHUT_WR);
  char sink[16 << 10];
  for (int i = 0; i < 64 && recv(conn->fd(), sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  connections_.fetch_sub(1);
  open_->Add(-1);
  loop->conns.erase(conn->fd());
}

void HttpServer::FlushOrArm(Loop* loop, Conn* c) {
  size_t before = c->out_empty() ? 0 : 1;
  if (!c->FlushSome()) {
    CloseConn(loop, c);
    return;
  }
  if (!c->out_empty()) {
    if (!c->write_armed_) {
      epoll_event ev{};
      ev.events = EPOLLOUT;  // stop reading until the client takes its responses
      ev.data.ptr = c;
      epoll_ctl(loop->epfd, EPOLL_CTL_MOD, c->fd(), &ev);
      c->write_armed_ = true;
      c->last_activity_ms_ = NowMs();
    }
    return;
  }
  if (before) c->last_activity_ms_ = NowMs();
  if (c->want_close_) {
    CloseConn(loop, c);
    return;
  }
  if (c->write_armed_) {
    c->write_armed_ = false;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = c;
    epoll_ctl(loop->epfd, EPOLL_CTL_MOD, c->fd(), &ev);
    ProcessInput(loop, c);  // pipelined requests that waited for the output to drain
    return;
  }
  if (Idle(c)) c->TrimIdle();
}

// Answers a request the server rejects before any handler runs, then closes.
void HttpServer::EmitError(Conn* c, int status, std::string_view message) {
  std::string body = ErrorJson(message);
  c->Append(kelp::StrCat("HTTP/1.1 ", status, " ", StatusText(status),
                         "\r\nServer: kelp\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                         "\r\nConnection: close\r\n\r\n", body));
  c->want_close_ = true;
}

void HttpServer::Dispatch(Conn* c) {
  Request& req = c->req_;
  ResponseWriter w(c, req.head_.method == "HEAD");
  try {
    handler_->Handle(req, w);
  } catch (const std::exception& e) {
    spdlog::error("{}: {} {} threw: {}", opts_.name, req.method(), req.target(), e.what());
    w.SendError(500, "internal error");
  }
  if (!w.head_written()) w.SendError(500, "handler wrote no response");
  if (!w.Finish().ok()) c->want_close_ = true;
  requests_->Inc();
  int cls = w.status() / 100;
  responses_[cls >= 1 && cls <= 5 ? cls : 0]->Inc();
  if (w.close_after_ || !req.head_.keep_alive) c->want_close_ = true;
}

void HttpServer::ProcessInput(Loop* loop, Conn* c) {
  while (!c->want_close_ && !c->write_armed_) {
    Request& req = c->req_;
    if (!c->have_head_) {
      if (c->buffered() == 0) {
        c->request_start_ms_ = 0;
        break;
      }
      if (c->request_start_ms_ == 0) c->request_start_ms_ = NowMs();
      ParseResult r = ParseRequestHead(c->pending_input(), &req.head_);
      if (r.kind == ParseResult::kIncomplete) {
        if (c->buffered() > opts_.max_head_bytes) {
          responses_[4]->Inc();
          EmitError(c, 431, "request head too large");
        }
        break;
      }
      if (r.kind == ParseResult::kError || r.consumed > opts_.max_head_bytes) {
        bad_requests_->Inc();
        responses_[r.kind == ParseResult::kError ? r.status / 100 : 4]->Inc();
        if (r.kind == ParseResult::kError) {
          EmitError(c, r.status, r.error);
        } else {
          EmitError(c, 431, "request head too large");
        }
        break;
      }
      c->Consume(r.consumed);
      if (!opts_.upgrades.empty() && !req.head_.framing.chunked && req.head_.framing.content_length == 0) {
        auto up = opts_.upgrades.find(req.head_.headers.Get("Upgrade"));
        if (up != opts_.upgrades.end()) {
          absl::Status allowed = opts_.upgrade_check ? opts_.upgrade_check(req) : absl::OkStatus();
          if (!allowed.ok()) {
            responses_[4]->Inc();
            EmitError(c, HttpStatusOf(allowed), ToStd(allowed.message()));
            break;
          }
          if (Upgrade(loop, c, req, up->second)) return;
        }
      }
      c->have_head_ = true;
      c->continue_sent_ = false;
      req.Begin(c);
      bool inline_ok = false;
      if (!req.head_.framing.chunked && req.body_left_ <= opts_.inline_body_limit) {
        try {
          inline_ok = handler_->RunInline(req);
        } catch (...) {
          inline_ok = false;
        }
      }
      if (!inline_ok) {
        HandOff(loop, c);
        return;
      }
    }
    if (c->buffered() < req.body_left_) {
      if (req.head_.expect_continue && !c->continue_sent_) {
        c->Append("HTTP/1.1 100 Continue\r\n\r\n");
        c->continue_sent_ = true;
      }
      break;
    }
    Dispatch(c);
    inline_requests_->Inc();
    c->Consume(req.body_left_);  // body bytes the handler did not read
    c->have_head_ = false;
    c->request_start_ms_ = c->buffered() > 0 ? NowMs() : 0;  // a pipelined request has begun
  }
  FlushOrArm(loop, c);
}

bool HttpServer::Upgrade(Loop* loop, Conn* c, const Request& req, const Options::UpgradeFn& to) {
  // Responses to requests pipelined before the upgrade must be out first.
  if (!c->out_empty() && (!c->FlushSome() || !c->out_empty())) return false;
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd(), nullptr);
  std::string initial(c->pending_input());
  int fd = c->ReleaseFd();
  connections_.fetch_sub(1);
  open_->Add(-1);
  requests_->Inc();
  responses_[1]->Inc();  // the handler answers 101
  to(fd, std::move(initial), req);  // req is c's: before c goes
  loop->conns.erase(fd);            // destroys c (its fd was released)
  return true;
}

void HttpServer::HandOff(Loop* loop, Conn* c) {
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd(), nullptr);
  c->on_worker_ = true;
  {
    MutexLock lock(blocking_mu_);
    blocking_fds_.insert(c->fd());
  }
  bool ok = workers_->TrySubmit([this, loop, c] { RunBlocking(loop, c); });
  if (!ok) {
    {
      MutexLock lock(blocking_mu_);
      blocking_fds_.erase(c->fd());
    }
    c->on_worker_ = false;
    c->have_head_ = false;
    responses_[5]->Inc();
    EmitError(c, 503, "server busy");
    c->FlushSome();
    CloseConn(loop, c);
  }
}

void HttpServer::RunBlocking(Loop* loop, Conn* c) {
  c->blocking_ = true;
  SetNonBlocking(c->fd(), false);
  SetTimeouts(c->fd(), opts_.io_timeout_ms);
  c->StartBody(Conn::Limits{opts_.io_timeout_ms, opts_.request_timeout_ms, opts_.body_min_rate});
  Request& req = c->req_;
  if (req.head_.expect_continue && !req.body_done_) {
    c->Append("HTTP/1.1 100 Continue\r\n\r\n");
    (void)c->FlushBlocking();
  }
  Dispatch(c);
  if (!c->FlushBlocking().ok()) c->want_close_ = true;
  // Skip a body the handler left unread, if it is small enough to be worth keeping the
  // connection; otherwise close.
  if (!c->want_close_ && !req.body_done_) {
    size_t skipped = 0;
    char buf[16 << 10];
    while (!req.body_done_ && skipped < kMaxDrainBytes) {
      auto n = req.Read(buf, sizeof buf);
      if (!n.ok() || *n == 0) break;
      skipped += *n;
    }
    if (!req.body_done_) c->want_close_ = true;
  }
  c->have_head_ = false;
  c->request_start_ms_ = 0;
  SetNonBlocking(c->fd(), true);
  c->blocking_ = false;
  {
    MutexLock lock(blocking_mu_);
    blocking_fds_.erase(c->fd());
  }
  {
    MutexLock lock(loop->mu);
    loop->returned.push_back(c);
  }
  uint64_t one = 1;
  (void)!write(loop->evfd, &one, sizeof one);
}

bool ServeMetrics(const Request& req, ResponseWriter& w) {
  if (req.path() != "/metrics" || (req.method() != "GET" && req.method() != "HEAD")) return false;
  w.Send(200, MetricsRegistry::Default().Render(), "text/plain; version=0.0.4");
  return true;
}

}  // namespace kelp::http
