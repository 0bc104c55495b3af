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
#include "shared/rpc/caller.h"
#include "shared/rpc/server_conn.h"
#include "shared/rpc/tls.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::rpc {
namespace {

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
    for (int t = 0; t <= kLoopFollowers; ++t) {
      loop->threads.emplace_back([this, loop, i] {
        std::string tname = kelp::StrCat(opts_.name, "-l", i).substr(0, 15);
        pthread_setname_np(pthread_self(), tname.c_str());
        LoopThread(loop);
      });
    }
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

void Server::Adopt(int fd, std::string initial, uint64_t client) {
  if (stopping_.load() || loops_.empty()) {
    close(fd);
    return;
  }
  Loop* loop = loops_[next_loop_.fetch_add(1) % loops_.size()].get();
  {
    MutexLock lock(loop->mu);
    loop->incoming.push_back({fd, std::move(initial), false, client});
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
    MutexLock lock(loop->lead_mu);
    loop->lead_cv.NotifyAll();
  }
  for (auto& loop : loops_) {
    for (auto& t : loop->threads) {
      if (t.joinable()) t.join();
    }
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

void Server::AddConn(Loop* loop, int fd, std::string initial, bool needs_head, uint64_t client) {
  SetNonBlocking(fd);
  SetNoDelay(fd);
  auto conn = std::make_shared<ServerConn>(this, loop, fd);
  conn->needs_head = needs_head;
  conn->client_id = client;
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

void Server::LoopThread(Loop* loop) {
  for (;;) {
    {
      MutexLock lock(loop->lead_mu);
      ++loop->idle;
      while (loop->led && !stopping_.load()) loop->lead_cv.Wait(lock);
      --loop->idle;
      if (loop->led) return;  // stopping, and the leader closes the connections
      loop->led = true;
    }
    Lead(loop);
    if (!loop->own) {
      // Stopping: the lead stays taken, so the others end too.
      CloseConns(loop);
      return;
    }
    Loop::OwnCall own = std::move(*loop->own);
    loop->own.reset();
    {
      MutexLock lock(loop->lead_mu);
      loop->led = false;
    }
    // A follower takes the lead while this thread runs the call: the thread switch is off
    // the call's path.
    loop->lead_cv.NotifyOne();
    RunCall(own.conn, *own.m, own.id, *own.req, false);
  }
}

void Server::CloseConns(Loop* loop) {
  for (auto& [fd, conn] : loop->conns) {
    conn->Close();
    epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, nullptr);
    connections_.fetch_sub(1);
    conn_gauge_->Add(-1);
  }
  loop->conns.clear();
}

bool Server::FollowerIdle(Loop* loop) {
  MutexLock lock(loop->lead_mu);
  return loop->idle > 0;
}

void Server::Lead(Loop* loop) {
  epoll_event events[128];
  while (!stopping_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(loop->epfd, events, 128, 1000);
    if (n < 0 && errno != EINTR) {
      spdlog::error("{}: epoll_wait: {}", opts_.name, strerror(errno));
      break;
    }
    // Once this thread keeps a call (loop->own, from any branch below) it stops: the events not
    // handled yet come back from the next epoll_wait (level-triggered), to the next leader.
    for (int i = 0; i < n && !loop->own; ++i) {
      int fd = events[i].data.fd;
      if (fd == loop->evfd) {
        uint64_t v;
        (void)!read(loop->evfd, &v, sizeof v);
        std::vector<Loop::Incoming> incoming;
        {
          MutexLock lock(loop->mu);
          incoming.swap(loop->incoming);
        }
        for (auto& in : incoming)
          AddConn(loop, in.fd, std::move(in.initial), in.needs_head, in.client);
        continue;
      }
      if (fd == listen_fd_ && listen_fd_ >= 0) {
        for (;;) {
          int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
          if (c < 0) break;
          Loop* target = loops_[next_loop_.fetch_add(1) % loops_.size()].get();
          if (target == loop) {
            AddConn(loop, c, "", true, 0);
          } else {
            {
              MutexLock lock(target->mu);
              target->incoming.push_back({c, "", true, 0});
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
    if (loop->own) return;
  }
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
  if (ok && !conn->needs_head) ok = ProcessFrames(loop, conn);
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
  absl::StatusOr<size_t> r = ParseUpgradeRequest(conn->input(), &conn->client_id);
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

bool Server::ProcessFrames(Loop* loop, const std::shared_ptr<ServerConn>& conn) {
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
        if (!loop->own && FollowerIdle(loop)) {
          // This thread runs it once this read is handled and the lead handed on: a call
          // that waits (a WAL sync) no longer waits first for a worker to wake up.
          loop->own = Loop::OwnCall{conn, m, id, std::move(req)};
          break;
        }
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
  ScopedCallerId caller(conn->client_id);
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
    ScopedCallerId caller(conn->client_id);
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
