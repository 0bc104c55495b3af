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
#include <ctime>
#include <unordered_map>
#include <utility>

#include "shared/strings.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/status.h"

namespace kelp::http {
namespace {

constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kFlushThreshold = 64 << 10;
constexpr size_t kMaxDrainBytes = 1 << 20;  // unread body we skip to keep a connection alive

void SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

const std::string& DateHeader() {
  thread_local time_t last = 0;
  thread_local std::string value;
  time_t now = time(nullptr);
  if (now != last) {
    last = now;
    tm t;
    gmtime_r(&now, &t);
    char buf[64];
    strftime(buf, sizeof buf, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &t);
    value = buf;
  }
  return value;
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace

// One client connection. Owned by its loop; while a worker runs its request (blocking_ is
// true) only that worker touches it, and the loop takes it back through Loop::returned.
class Conn {
 public:
  Conn(HttpServer* server, int fd, std::string peer) : server_(server), fd_(fd) { req_.peer_ = std::move(peer); }
  ~Conn() {
    if (fd_ >= 0) close(fd_);
  }
  // Gives the socket away (an upgrade): the destructor leaves it open.
  int ReleaseFd() { return std::exchange(fd_, -1); }

  int fd() const { return fd_; }
  size_t buffered() const { return in_len_ - in_pos_; }
  std::string_view pending_input() const { return std::string_view(in_.data() + in_pos_, in_len_ - in_pos_); }

  // Reads once from the socket into the input buffer. Returns bytes read, 0 on EOF, -1 on
  // error (errno set; EAGAIN in non-blocking mode).
  ssize_t ReadSome() {
    if (in_pos_ == in_len_) {
      in_len_ = in_pos_ = 0;
    } else if (in_pos_ > (256 << 10) && in_pos_ > in_len_ / 2) {
      in_.erase(0, in_pos_);
      in_len_ -= in_pos_;
      in_pos_ = 0;
    }
    // in_ only grows: resizing it for every recv would zero-fill kReadChunk bytes each time.
    if (in_.size() < in_len_ + kReadChunk) in_.resize(in_len_ + kReadChunk);
    ssize_t n;
    do {
      n = recv(fd_, in_.data() + in_len_, kReadChunk, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) in_len_ += n;
    return n;
  }

  // Blocking mode: more body bytes from the socket.
  absl::Status Fill() {
    if (!blocking_) return absl::InternalError("request body incomplete on the event loop");
    ssize_t n = ReadSome();
    if (n > 0) return absl::OkStatus();
    if (n == 0) return absl::DataLossError("client closed the connection mid-body");
    if (errno == EAGAIN || errno == EWOULDBLOCK) return absl::DeadlineExceededError("timed out reading request body");
    return ErrnoStatus("recv request body");
  }

  void Consume(size_t n) { in_pos_ += n; }

  void Append(std::string_view data) { out_.append(data); }

  // Blocking mode: writes everything buffered.
  absl::Status FlushBlocking() {
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

  // Output path used by ResponseWriter in both modes.
  absl::Status Emit(std::string_view data) {
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

  // Non-blocking mode: writes what the socket takes. Returns false on a hard error.
  bool FlushSome() {
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
  bool out_empty() const { return out_pos_ == out_.size(); }

  HttpServer* server_;
  int fd_;
  Request req_;
  bool have_head_ = false;
  bool blocking_ = false;
  bool want_close_ = false;
  bool write_armed_ = false;
  bool continue_sent_ = false;
  bool write_failed_ = false;

 private:
  std::string in_;       // bytes [in_pos_, in_len_) are unparsed input; the rest is spare room
  size_t in_len_ = 0;
  size_t in_pos_ = 0;
  std::string out_;
  size_t out_pos_ = 0;
};

// ---- Request ---------------------------------------------------------------------------

absl::StatusOr<size_t> Request::Read(char* buf, size_t n) {
  if (body_done_ || n == 0) return 0;
  if (!head_.framing.chunked) {
    if (body_left_ == 0) {
      body_done_ = true;
      return 0;
    }
    if (conn_->buffered() == 0) RETURN_IF_ERROR(conn_->Fill());
    size_t take = std::min<uint64_t>({n, conn_->buffered(), body_left_});
    memcpy(buf, conn_->pending_input().data(), take);
    conn_->Consume(take);
    body_left_ -= take;
    if (body_left_ == 0) body_done_ = true;
    return take;
  }
  std::string out;
  for (;;) {
    if (conn_->buffered() > 0) {
      int64_t used = chunked_.Decode(conn_->pending_input(), &out, n);
      if (used < 0) return absl::InvalidArgumentError("malformed chunked request body");
      conn_->Consume(used);
      if (chunked_.done()) body_done_ = true;
      if (!out.empty() || body_done_) break;
    }
    RETURN_IF_ERROR(conn_->Fill());
  }
  memcpy(buf, out.data(), out.size());
  return out.size();
}

absl::StatusOr<std::string> Request::ReadAll(size_t limit) {
  int64_t cl = content_length();
  if (cl > static_cast<int64_t>(limit)) {
    return PosixError(EFBIG, kelp::StrCat("request body of ", cl, " bytes exceeds the limit of ", limit));
  }
  std::string body;
  if (cl > 0) body.reserve(cl);
  char buf[64 << 10];
  for (;;) {
    ASSIGN_OR_RETURN(size_t n, Read(buf, sizeof buf));
    if (n == 0) break;
    if (body.size() + n > limit) {
      return PosixError(EFBIG, kelp::StrCat("request body exceeds the limit of ", limit, " bytes"));
    }
    body.append(buf, n);
  }
  return body;
}

absl::StatusOr<size_t> Request::ReadFull(char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ASSIGN_OR_RETURN(size_t k, Read(buf + got, n - got));
    if (k == 0) break;
    got += k;
  }
  return got;
}

// ---- ResponseWriter --------------------------------------------------------------------

absl::Status ResponseWriter::WriteHead(int status, const Headers& headers, int64_t content_length) {
  if (head_written_) return absl::FailedPreconditionError("response head already written");
  head_written_ = true;
  status_ = status;
  chunked_ = content_length < 0;
  body_left_ = content_length;
  std::string head = kelp::StrCat("HTTP/1.1 ", status, " ", StatusText(status), "\r\nServer: kelp\r\n");
  head += DateHeader();
  for (const auto& [k, v] : headers.items()) kelp::StrAppend(&head, k, ": ", v, "\r\n");
  if (chunked_) {
    if (!head_request_) head += "Transfer-Encoding: chunked\r\n";
  } else if (status != 204 && status != 304) {
    kelp::StrAppend(&head, "Content-Length: ", content_length, "\r\n");
  }
  const Request& req = conn_->req_;
  if (close_after_ || !req.head_.keep_alive) {
    head += "Connection: close\r\n";
    close_after_ = true;
  } else if (req.head_.version_minor == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  if (head_request_) {
    finished_ = true;
    body_left_ = 0;
  }
  return conn_->Emit(head);
}

absl::Status ResponseWriter::Write(std::string_view data) {
  if (!head_written_) return absl::FailedPreconditionError("response head not written");
  if (head_request_ || data.empty()) return absl::OkStatus();
  if (finished_) return absl::FailedPreconditionError("response already finished");
  body_bytes_ += data.size();
  if (chunked_) {
    char size_line[32];
    int n = snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
    RETURN_IF_ERROR(conn_->Emit(std::string_view(size_line, n)));
    RETURN_IF_ERROR(conn_->Emit(data));
    return conn_->Emit("\r\n");
  }
  if (static_cast<int64_t>(data.size()) > body_left_) {
    return absl::InternalError("response body longer than its Content-Length");
  }
  body_left_ -= data.size();
  return conn_->Emit(data);
}

absl::Status ResponseWriter::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (chunked_ && !head_request_) RETURN_IF_ERROR(conn_->Emit("0\r\n\r\n"));
  if (!chunked_ && body_left_ > 0) {
    close_after_ = true;  // the client would wait for bytes that never come
    return absl::InternalError("response body shorter than its Content-Length");
  }
  return absl::OkStatus();
}

void ResponseWriter::Send(int status, std::string_view body, std::string_view content_type, const Headers& extra) {
  Headers h = extra;
  if (!content_type.empty()) h.Set("Content-Type", content_type);
  if (!WriteHead(status, h, body.size()).ok()) return;
  (void)Write(body);
  (void)Finish();
}

void ResponseWriter::SendJson(int status, std::string_view json, const Headers& extra) {
  Send(status, json, "application/json", extra);
}

void ResponseWriter::SendError(int status, std::string_view message) {
  if (head_written_) {
    close_after_ = true;
    return;
  }
  SendJson(status, kelp::StrCat("{\"error\":\"", JsonEscape(message), "\"}\n"));
}

void ResponseWriter::SendStatus(const absl::Status& status) {
  SendError(HttpStatusOf(status), ToStd(status.message()));
}

// ---- Server ----------------------------------------------------------------------------

struct HttpServer::Loop {
  int epfd = -1;
  int evfd = -1;
  std::thread thread;
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  std::mutex mu;
  std::vector<Conn*> returned ABSL_GUARDED_BY(mu);
};

HttpServer::HttpServer(Options options, Handler* handler) : opts_(std::move(options)), handler_(handler) {
  if (opts_.loop_threads <= 0) opts_.loop_threads = std::max(1u, std::thread::hardware_concurrency());
  auto& m = MetricsRegistry::Default();
  requests_ = m.GetCounter("kelp_http_requests_total", "HTTP requests answered.", {{"server", opts_.name}});
  inline_requests_ = m.GetCounter("kelp_http_inline_requests_total", "HTTP requests answered on the event loop.",
                                  {{"server", opts_.name}});
  bad_requests_ = m.GetCounter("kelp_http_malformed_requests_total", "HTTP requests rejected by the parser.",
                               {{"server", opts_.name}});
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

  workers_ = std::make_unique<ThreadPool>(opts_.name + "-w", opts_.worker_threads, opts_.worker_queue);
  for (int i = 0; i < opts_.loop_threads; ++i) {
    auto loop = std::make_unique<Loop>();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.ptr = nullptr;  // the listening socket
    epoll_ctl(loop->epfd, EPOLL_CTL_ADD, listen_fd_, &ev);
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
    return;
  }
  {
    std::lock_guard lock(blocking_mu_);
    for (int fd : blocking_fds_) shutdown(fd, SHUT_RDWR);
  }
  if (workers_) workers_->Stop();
  for (auto& loop : loops_) {
    uint64_t one = 1;
    (void)!write(loop->evfd, &one, sizeof one);
  }
  for (auto& loop : loops_) {
    if (loop->thread.joinable()) loop->thread.join();
    loop->conns.clear();
    close(loop->epfd);
    close(loop->evfd);
  }
  loops_.clear();
  close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::RunLoop(Loop* loop) {
  epoll_event events[256];
  while (!stopping_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(loop->epfd, events, 256, 1000);
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
          std::lock_guard lock(loop->mu);
          back.swap(loop->returned);
        }
        for (Conn* c : back) {
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
        ProcessInput(loop, c);
      }
    }
  }
}

void HttpServer::Accept(Loop* loop) {
  for (int i = 0; i < 64; ++i) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or EMFILE: try again on the next wake-up
    }
    if (connections_.load() >= opts_.max_connections) {
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
    auto conn = std::make_unique<Conn>(this, fd, kelp::StrCat(ip, ":", ntohs(addr.sin_port)));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = conn.get();
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) continue;
    connections_.fetch_add(1);
    loop->conns.emplace(fd, std::move(conn));
  }
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
  loop->conns.erase(conn->fd());
}

void HttpServer::FlushOrArm(Loop* loop, Conn* c) {
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
    }
    return;
  }
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
  }
}

namespace {

// Answers a request the parser rejected, then closes.
void EmitParseError(Conn* c, int status, const std::string& message) {
  std::string body = kelp::StrCat("{\"error\":\"", JsonEscape(message), "\"}\n");
  c->Append(kelp::StrCat("HTTP/1.1 ", status, " ", StatusText(status),
                         "\r\nServer: kelp\r\nContent-Type: application/json\r\nContent-Length: ",
                         body.size(), "\r\nConnection: close\r\n\r\n", body));
  c->want_close_ = true;
}

void FinishResponse(ResponseWriter& w, Conn* c) {
  if (!w.head_written()) w.SendError(500, "handler wrote no response");
  if (!w.Finish().ok()) c->want_close_ = true;
}

}  // namespace

void HttpServer::ProcessInput(Loop* loop, Conn* c) {
  while (!c->want_close_ && !c->write_armed_) {
    Request& req = c->req_;
    if (!c->have_head_) {
      if (c->buffered() == 0) break;
      ParseResult r = ParseRequestHead(c->pending_input(), &req.head_);
      if (r.kind == ParseResult::kIncomplete) {
        if (c->buffered() > opts_.max_head_bytes) EmitParseError(c, 431, "request head too large");
        break;
      }
      if (r.kind == ParseResult::kError) {
        bad_requests_->Inc();
        EmitParseError(c, r.status, r.error);
        break;
      }
      if (r.consumed > opts_.max_head_bytes) {
        EmitParseError(c, 431, "request head too large");
        break;
      }
      c->Consume(r.consumed);
      if (!opts_.upgrades.empty() && !req.head_.framing.chunked && req.head_.framing.content_length == 0) {
        auto up = opts_.upgrades.find(req.head_.headers.Get("Upgrade"));
        if (up != opts_.upgrades.end() && Upgrade(loop, c, up->second)) return;
      }
      c->have_head_ = true;
      c->continue_sent_ = false;
      req.conn_ = c;
      req.chunked_ = ChunkedDecoder();
      req.body_left_ = req.head_.framing.chunked ? 0 : req.head_.framing.content_length;
      req.body_done_ = !req.head_.framing.chunked && req.body_left_ == 0;
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
    ResponseWriter w;
    w.conn_ = c;
    w.head_request_ = req.head_.method == "HEAD";
    try {
      handler_->Handle(req, w);
    } catch (const std::exception& e) {
      spdlog::error("{}: {} {} threw: {}", opts_.name, req.method(), req.target(), e.what());
      w.SendError(500, "internal error");
    }
    FinishResponse(w, c);
    requests_->Inc();
    inline_requests_->Inc();
    c->Consume(req.body_left_);  // body bytes the handler did not read
    c->have_head_ = false;
    if (w.close_after_ || !req.head_.keep_alive) c->want_close_ = true;
  }
  FlushOrArm(loop, c);
}

bool HttpServer::Upgrade(Loop* loop, Conn* c, const std::function<void(int, std::string)>& to) {
  // Responses to requests pipelined before the upgrade must be out first.
  if (!c->out_empty() && (!c->FlushSome() || !c->out_empty())) return false;
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd(), nullptr);
  std::string initial(c->pending_input());
  int fd = c->ReleaseFd();
  connections_.fetch_sub(1);
  requests_->Inc();
  loop->conns.erase(fd);  // destroys c
  to(fd, std::move(initial));
  return true;
}

void HttpServer::HandOff(Loop* loop, Conn* c) {
  epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd(), nullptr);
  {
    std::lock_guard lock(blocking_mu_);
    blocking_fds_.insert(c->fd());
  }
  bool ok = workers_->TrySubmit([this, loop, c] { RunBlocking(loop, c); });
  if (!ok) {
    {
      std::lock_guard lock(blocking_mu_);
      blocking_fds_.erase(c->fd());
    }
    c->have_head_ = false;
    EmitParseError(c, 503, "server busy");
    c->FlushSome();
    CloseConn(loop, c);
  }
}

void HttpServer::RunBlocking(Loop* loop, Conn* c) {
  c->blocking_ = true;
  SetNonBlocking(c->fd(), false);
  SetTimeouts(c->fd(), opts_.io_timeout_ms);
  Request& req = c->req_;
  ResponseWriter w;
  w.conn_ = c;
  w.head_request_ = req.head_.method == "HEAD";
  if (req.head_.expect_continue && !req.body_done_) {
    c->Append("HTTP/1.1 100 Continue\r\n\r\n");
    (void)c->FlushBlocking();
  }
  try {
    handler_->Handle(req, w);
  } catch (const std::exception& e) {
    spdlog::error("{}: {} {} threw: {}", opts_.name, req.method(), req.target(), e.what());
    w.SendError(500, "internal error");
  }
  FinishResponse(w, c);
  requests_->Inc();
  if (!c->FlushBlocking().ok()) c->want_close_ = true;
  if (w.close_after_ || !req.head_.keep_alive) c->want_close_ = true;
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
  SetNonBlocking(c->fd(), true);
  c->blocking_ = false;
  {
    std::lock_guard lock(blocking_mu_);
    blocking_fds_.erase(c->fd());
  }
  {
    std::lock_guard lock(loop->mu);
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
