#include "shared/http/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>


#include "shared/blocking.h"
#include "shared/strings.h"
#include "shared/status.h"

namespace kelp::http {
namespace {

constexpr auto kIdleMax = std::chrono::seconds(30);

absl::Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("send");
    }
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(std::string_view host_port) {
  size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string_view::npos || !kelp::ParseInt(host_port.substr(colon + 1), &port) || port <= 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(kelp::StrCat("bad address \"", host_port, "\": want host:port"));
  }
  return std::make_pair(std::string(host_port.substr(0, colon)), port);
}

// A receive buffer that grows without zero-filling: std::string::resize would clear 64 KiB
// for every recv.
class RecvBuffer {
 public:
  size_t size() const { return len_; }
  void clear() { len_ = 0; }
  // Room for n more bytes; returns where they go.
  char* Reserve(size_t n) {
    if (cap_ < len_ + n) {
      size_t cap = std::max(len_ + n, cap_ * 2);
      auto bigger = std::make_unique_for_overwrite<char[]>(cap);
      if (len_ > 0) memcpy(bigger.get(), data_.get(), len_);
      data_ = std::move(bigger);
      cap_ = cap;
    }
    return data_.get() + len_;
  }
  void Grow(size_t n) { len_ += n; }
  operator std::string_view() const { return std::string_view(data_.get(), len_); }

 private:
  std::unique_ptr<char[]> data_;
  size_t cap_ = 0, len_ = 0;
};

}  // namespace

HttpClient::HttpClient() : HttpClient(Options{}) {}
HttpClient::HttpClient(Options options) : opts_(options) {}

HttpClient::~HttpClient() {
  MutexLock lock(mu_);
  for (auto& [k, v] : idle_) {
    for (auto& i : v) close(i.fd);
  }
}

HttpClient& HttpClient::Default() {
  static HttpClient* c = new HttpClient;
  return *c;
}

absl::StatusOr<int> HttpClient::Connect(std::string_view host_port) {
  ASSIGN_OR_RETURN(auto hp, SplitHostPort(host_port));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(hp.second);
  std::string host = hp.first == "localhost" ? "127.0.0.1" : hp.first;
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
      return absl::UnavailableError(kelp::StrCat("cannot resolve ", host));
    }
    addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("socket");
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (rc < 0 && errno != EINPROGRESS) {
    absl::Status s = ErrnoStatus(kelp::StrCat("connect ", host_port));
    close(fd);
    return s;
  }
  if (rc < 0) {
    pollfd p{fd, POLLOUT, 0};
    int pr = poll(&p, 1, opts_.connect_timeout_ms);
    int err = 0;
    socklen_t len = sizeof err;
    if (pr <= 0) {
      close(fd);
      return PosixError(ETIMEDOUT, kelp::StrCat("connect ", host_port, ": timed out"));
    }
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      close(fd);
      return PosixError(err, kelp::StrCat("connect ", host_port, ": ", strerror(err)));
    }
  }
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{opts_.io_timeout_ms / 1000, (opts_.io_timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

int HttpClient::TakeIdle(const std::string& host_port) {
  MutexLock lock(mu_);
  auto it = idle_.find(host_port);
  if (it == idle_.end()) return -1;
  auto now = std::chrono::steady_clock::now();
  while (!it->second.empty()) {
    Idle i = it->second.back();
    it->second.pop_back();
    if (now - i.since < kIdleMax) return i.fd;
    close(i.fd);
  }
  return -1;
}

void HttpClient::PutIdle(const std::string& host_port, int fd) {
  MutexLock lock(mu_);
  auto& v = idle_[host_port];
  if (v.size() >= opts_.max_idle_per_host) {
    close(fd);
    return;
  }
  v.push_back(Idle{fd, std::chrono::steady_clock::now()});
}

absl::StatusOr<ClientResponse> HttpClient::Do(
    std::string_view method, std::string_view host_port, std::string_view target,
    const Headers& headers, std::string_view body,
    const std::function<absl::Status(std::string_view)>& on_body, BodyBuffer into) {
  AboutToBlock();
  std::string key(host_port);
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = attempt == 0 ? TakeIdle(key) : -1;
    bool pooled = fd >= 0;
    if (!pooled) {
      ASSIGN_OR_RETURN(fd, Connect(host_port));
    }
    bool keep_alive = false, got_bytes = false;
    auto r = DoOnce(fd, method, host_port, target, headers, body, on_body, into, &keep_alive,
                    &got_bytes);
    if (r.ok() && keep_alive) {
      PutIdle(key, fd);
    } else {
      close(fd);
    }
    if (!r.ok() && pooled && !got_bytes) continue;  // stale keep-alive connection: retry fresh
    return r;
  }
  return absl::UnavailableError("unreachable");
}

absl::StatusOr<ClientResponse> HttpClient::DoOnce(
    int fd, std::string_view method, std::string_view host_port, std::string_view target,
    const Headers& headers, std::string_view body,
    const std::function<absl::Status(std::string_view)>& on_body, BodyBuffer into, bool* keep_alive,
    bool* got_bytes) {
  std::string head = kelp::StrCat(method, " ", target, " HTTP/1.1\r\nHost: ", host_port, "\r\n");
  for (const auto& [k, v] : headers.items()) kelp::StrAppend(&head, k, ": ", v, "\r\n");
  bool has_body = !body.empty() || method == "PUT" || method == "POST";
  if (has_body) kelp::StrAppend(&head, "Content-Length: ", body.size(), "\r\n");
  head += "\r\n";
  absl::Status sent;
  if (body.size() <= (64 << 10)) {
    head.append(body);
    sent = SendAll(fd, head);
  } else {
    sent = SendAll(fd, head);
    if (sent.ok()) sent = SendAll(fd, body);
  }
  // A server may answer before taking the whole body (413, 507...) and close: its answer
  // is still in our socket, so read it rather than report the failed send.

  RecvBuffer buf;
  size_t pos = 0;
  // recv into dst (at most n bytes): the count, or the error.
  auto recv_some = [&](char* dst, size_t n) -> absl::StatusOr<size_t> {
    ssize_t got;
    do {
      got = recv(fd, dst, n, 0);
    } while (got < 0 && errno == EINTR);
    if (got == 0)
      return absl::UnavailableError(kelp::StrCat("connection to ", host_port, " closed"));
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return PosixError(ETIMEDOUT, kelp::StrCat("reading from ", host_port, ": timed out"));
      }
      return ErrnoStatus(kelp::StrCat("recv from ", host_port));
    }
    *got_bytes = true;
    return static_cast<size_t>(got);
  };
  auto read_more = [&]() -> absl::Status {
    if (pos > 0 && pos == buf.size()) {
      buf.clear();
      pos = 0;
    }
    ASSIGN_OR_RETURN(size_t n, recv_some(buf.Reserve(64 << 10), 64 << 10));
    buf.Grow(n);
    return absl::OkStatus();
  };

  ResponseHead rh;
  for (;;) {
    ParseResult r = ParseResponseHead(std::string_view(buf).substr(pos), method, &rh);
    if (r.kind == ParseResult::kOk) {
      pos += r.consumed;
      if (rh.status >= 100 && rh.status < 200) continue;  // 100 Continue: the real head follows
      break;
    }
    if (r.kind == ParseResult::kError) {
      return absl::UnavailableError(kelp::StrCat("bad response from ", host_port, ": ", r.error));
    }
    if (buf.size() - pos > (64 << 10)) return absl::UnavailableError("response head too large");
    if (absl::Status r = read_more(); !r.ok()) return sent.ok() ? r : sent;
  }

  ClientResponse resp;
  resp.status = rh.status;
  resp.headers = std::move(rh.headers);
  auto deliver = [&](std::string_view piece) -> absl::Status {
    if (piece.empty()) return absl::OkStatus();
    if (on_body && resp.status >= 200 && resp.status < 300) return on_body(piece);
    if (resp.body.size() + piece.size() > opts_.max_body_bytes) {
      return absl::ResourceExhaustedError("response body too large");
    }
    resp.body.append(piece);
    return absl::OkStatus();
  };

  if (rh.framing.chunked) {
    ChunkedDecoder dec;
    std::string out;
    while (!dec.done()) {
      if (pos == buf.size()) RETURN_IF_ERROR(read_more());
      out.clear();
      int64_t used = dec.Decode(std::string_view(buf).substr(pos), &out, 1 << 20);
      if (used < 0) return absl::UnavailableError("malformed chunked response");
      pos += used;
      RETURN_IF_ERROR(deliver(out));
    }
  } else if (rh.framing.until_close) {
    for (;;) {
      RETURN_IF_ERROR(deliver(std::string_view(buf).substr(pos)));
      pos = buf.size();
      absl::Status s = read_more();
      if (!s.ok()) break;  // EOF ends the body
    }
  } else if (on_body && into.data != nullptr && resp.status >= 200 && resp.status < 300 &&
             rh.framing.content_length >= 0 &&
             static_cast<uint64_t>(rh.framing.content_length) <= into.size) {
    // Straight into the caller's memory: what came with the head is moved there, the rest is
    // received there.
    const size_t length = static_cast<size_t>(rh.framing.content_length);
    size_t filled = std::min(length, buf.size() - pos);
    if (filled > 0) {
      std::memcpy(into.data, std::string_view(buf).data() + pos, filled);
      pos += filled;
      RETURN_IF_ERROR(on_body(std::string_view(into.data, filled)));
    }
    while (filled < length) {
      ASSIGN_OR_RETURN(size_t n, recv_some(into.data + filled, length - filled));
      RETURN_IF_ERROR(on_body(std::string_view(into.data + filled, n)));
      filled += n;
    }
  } else {
    uint64_t left = rh.framing.content_length;
    if (!on_body) resp.body.reserve(std::min<uint64_t>(left, opts_.max_body_bytes));
    while (left > 0) {
      if (pos == buf.size()) RETURN_IF_ERROR(read_more());
      size_t take = std::min<uint64_t>(left, buf.size() - pos);
      RETURN_IF_ERROR(deliver(std::string_view(buf).substr(pos, take)));
      pos += take;
      left -= take;
    }
  }
  *keep_alive = sent.ok() && rh.keep_alive && pos == buf.size();
  return resp;
}

}  // namespace kelp::http
