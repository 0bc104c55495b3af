// HttpClient against a scripted server on loopback: each response is written byte for byte by
// the test, so framing, keep-alive, retries and limits are exercised exactly.
#include "shared/http/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "shared/mutex.h"
#include "shared/status.h"

using namespace kelp::http;

namespace {

// Accepts connections and answers each request with reply(request, connection number). The
// reply is sent as is; close_after makes the server close the connection after it.
class ScriptedServer {
 public:
  struct Reply {
    std::string bytes;
    bool close_after = false;
    bool silent = false;  // send nothing and keep the connection open (a hung server)
  };
  using Script = std::function<Reply(const std::string& request, int conn)>;

  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listen_fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(listen_fd_, 16) == 0);
    socklen_t len = sizeof a;
    REQUIRE(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~ScriptedServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    std::vector<std::thread> conns;
    {
      kelp::MutexLock lock(mu_);
      for (int fd : conn_fds_) shutdown(fd, SHUT_RDWR);
      conns.swap(conns_);
    }
    for (auto& t : conns) t.join();
    kelp::MutexLock lock(mu_);
    for (int fd : conn_fds_) close(fd);
  }

  std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
  int connections() const { return accepted_.load(); }
  std::vector<std::string> requests() {
    kelp::MutexLock lock(mu_);
    return requests_;
  }

 private:
  void Accept() {
    for (;;) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      int n = accepted_.fetch_add(1);
      kelp::MutexLock lock(mu_);
      conn_fds_.push_back(fd);
      conns_.emplace_back([this, fd, n] { Serve(fd, n); });
    }
  }
  // Reads one request (head, and a body of Content-Length bytes); "" at EOF.
  static std::string ReadRequest(int fd, std::string* pending) {
    char buf[4096];
    for (;;) {
      size_t head_end = pending->find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t need = head_end + 4;
        size_t cl = pending->find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) need += std::stoul(pending->substr(cl + 16));
        if (pending->size() >= need) {
          std::string req = pending->substr(0, need);
          pending->erase(0, need);
          return req;
        }
      }
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return "";
      pending->append(buf, n);
    }
  }
  void Serve(int fd, int conn) {
    std::string pending;
    for (;;) {
      std::string req = ReadRequest(fd, &pending);
      if (req.empty()) break;
      {
        kelp::MutexLock lock(mu_);
        requests_.push_back(req);
      }
      Reply r = script_(req, conn);
      if (r.silent) continue;
      if (send(fd, r.bytes.data(), r.bytes.size(), MSG_NOSIGNAL) < 0) break;
      if (r.close_after) break;
    }
    shutdown(fd, SHUT_WR);
  }

  Script script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  kelp::Mutex mu_;
  std::vector<int> conn_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> conns_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
};

std::string Ok(std::string_view body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         std::string(body);
}

// A port nothing listens on: bound, then closed.
int DeadPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("HttpClient sends method, target, headers and body, and reads the response") {
  ScriptedServer s([](const std::string&, int) {
    return ScriptedServer::Reply{"HTTP/1.1 201 Created\r\nX-Thing: yes\r\nContent-Length: 5\r\n\r\nhello"};
  });
  HttpClient c;
  Headers h;
  h.Set("X-Req", "1");
  auto r = c.Do("PUT", s.addr(), "/a/b?x=1", h, "payload");
  REQUIRE(r.ok());
  CHECK(r->status == 201);
  CHECK(r->body == "hello");
  CHECK(r->headers.Get("X-Thing") == "yes");
  auto reqs = s.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].rfind("PUT /a/b?x=1 HTTP/1.1\r\n", 0) == 0);
  CHECK(reqs[0].find("Host: " + s.addr() + "\r\n") != std::string::npos);
  CHECK(reqs[0].find("X-Req: 1\r\n") != std::string::npos);
  CHECK(reqs[0].find("Content-Length: 7\r\n") != std::string::npos);
  CHECK(reqs[0].substr(reqs[0].size() - 7) == "payload");
}

TEST_CASE("HttpClient decodes chunked and until-close bodies, and skips 100 Continue") {
  ScriptedServer s([](const std::string& req, int) -> ScriptedServer::Reply {
    if (req.find("GET /chunked") == 0) {
      return {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"};
    }
    if (req.find("GET /close") == 0) return {"HTTP/1.1 200 OK\r\n\r\nuntil the end", true};
    return {"HTTP/1.1 100 Continue\r\n\r\n" + Ok("after continue")};
  });
  HttpClient c;
  auto chunked = c.Get(s.addr(), "/chunked");
  REQUIRE(chunked.ok());
  CHECK(chunked->body == "hello world");
  auto until_close = c.Get(s.addr(), "/close");
  REQUIRE(until_close.ok());
  CHECK(until_close->body == "until the end");
  auto cont = c.Do("POST", s.addr(), "/continue", {}, "x");
  REQUIRE(cont.ok());
  CHECK(cont->status == 200);
  CHECK(cont->body == "after continue");
}

TEST_CASE("HttpClient reuses a kept-alive connection and retries once when it went stale") {
  SECTION("kept alive: one connection for several requests") {
    ScriptedServer s([](const std::string&, int) { return ScriptedServer::Reply{Ok("k")}; });
    HttpClient c;
    for (int i = 0; i < 5; ++i) REQUIRE(c.Get(s.addr(), "/").ok());
    CHECK(s.connections() == 1);
    CHECK(s.requests().size() == 5);
  }
  SECTION("the server closed the idle connection: the request goes again on a fresh one") {
    // Each connection answers one request and closes without saying so (no Connection: close),
    // so the client pools a connection that is dead when it is next used.
    ScriptedServer s([](const std::string&, int conn) {
      return ScriptedServer::Reply{Ok("conn " + std::to_string(conn)), true};
    });
    HttpClient c;
    auto first = c.Get(s.addr(), "/");
    REQUIRE(first.ok());
    CHECK(first->body == "conn 0");
    auto second = c.Get(s.addr(), "/");
    REQUIRE(second.ok());
    CHECK(second->body == "conn 1");
    CHECK(s.connections() == 2);
  }
}

TEST_CASE("HttpClient streams a 2xx body to on_body, and an error body stays in the response") {
  std::string big(300000, 'b');
  ScriptedServer s([&](const std::string& req, int) -> ScriptedServer::Reply {
    if (req.find("GET /missing") == 0) {
      return {"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"};
    }
    return {Ok(big)};
  });
  HttpClient c;
  std::string got;
  auto r = c.Do("GET", s.addr(), "/big", {}, {}, [&](std::string_view p) {
    got.append(p);
    return absl::OkStatus();
  });
  REQUIRE(r.ok());
  CHECK(r->body.empty());
  CHECK(got == big);

  std::string sunk;
  auto missing = c.Do("GET", s.addr(), "/missing", {}, {}, [&](std::string_view p) {
    sunk.append(p);
    return absl::OkStatus();
  });
  REQUIRE(missing.ok());
  CHECK(missing->status == 404);
  CHECK(missing->body == "not found");
  CHECK(sunk.empty());

  // A sink's error ends the transfer and is what Do returns.
  auto stopped = c.Do("GET", s.addr(), "/big", {}, {},
                      [](std::string_view) { return absl::CancelledError("enough"); });
  CHECK(stopped.status().code() == absl::StatusCode::kCancelled);
}

TEST_CASE("HttpClient receives a 2xx body of known length straight into the caller's buffer") {
  std::string big(300000, 'b');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>('a' + i % 26);
  ScriptedServer s([&](const std::string& req, int) -> ScriptedServer::Reply {
    if (req.find("GET /missing") == 0) {
      return {"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"};
    }
    if (req.find("GET /chunked") == 0) {
      return {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"};
    }
    return {Ok(big)};
  });
  HttpClient c;
  // Pieces that lie in buf, each right after the one before, and the bytes of all pieces.
  struct Seen {
    size_t in_place = 0, elsewhere = 0;
    std::string bytes;
  };
  auto sink = [](std::string& buf, Seen* seen) {
    return [&buf, seen](std::string_view p) {
      if (p.data() == buf.data() + seen->bytes.size()) {
        ++seen->in_place;
      } else {
        ++seen->elsewhere;
      }
      seen->bytes.append(p);
      return absl::OkStatus();
    };
  };

  std::string buf(big.size(), 'x');
  Seen seen;
  auto r =
      c.Do("GET", s.addr(), "/big", {}, {}, sink(buf, &seen), BodyBuffer{buf.data(), buf.size()});
  REQUIRE(r.ok());
  CHECK(r->body.empty());
  CHECK(seen.elsewhere == 0);
  CHECK(seen.in_place > 0);
  CHECK(seen.bytes == big);
  CHECK(buf == big);

  // A buffer too small for the body: the pieces come through the client's own buffer.
  std::string small(1000, 'x');
  Seen through;
  r = c.Do("GET", s.addr(), "/big", {}, {}, sink(small, &through),
           BodyBuffer{small.data(), small.size()});
  REQUIRE(r.ok());
  CHECK(through.in_place == 0);
  CHECK(through.bytes == big);
  CHECK(small == std::string(1000, 'x'));

  // A chunked body has no length to receive into: decoded as before.
  Seen chunked;
  r = c.Do("GET", s.addr(), "/chunked", {}, {}, sink(buf, &chunked),
           BodyBuffer{buf.data(), buf.size()});
  REQUIRE(r.ok());
  CHECK(chunked.bytes == "hello");
  CHECK(chunked.in_place == 0);

  // An error's text stays in the response; the buffer is not touched.
  std::string untouched(64, 'x');
  Seen none;
  r = c.Do("GET", s.addr(), "/missing", {}, {}, sink(untouched, &none),
           BodyBuffer{untouched.data(), untouched.size()});
  REQUIRE(r.ok());
  CHECK(r->status == 404);
  CHECK(r->body == "not found");
  CHECK(none.bytes.empty());
  CHECK(untouched == std::string(64, 'x'));
}

TEST_CASE("HttpClient limits, timeouts and unreachable servers are errors, not hangs") {
  SECTION("a body over max_body_bytes") {
    ScriptedServer s([](const std::string&, int) {
      return ScriptedServer::Reply{Ok(std::string(5000, 'x'))};
    });
    HttpClient::Options o;
    o.max_body_bytes = 4096;
    HttpClient c(o);
    CHECK(c.Get(s.addr(), "/").status().code() == absl::StatusCode::kResourceExhausted);
  }
  SECTION("a server that never answers: ETIMEDOUT after io_timeout_ms") {
    ScriptedServer s([](const std::string&, int) { return ScriptedServer::Reply{"", false, true}; });
    HttpClient::Options o;
    o.io_timeout_ms = 200;
    HttpClient c(o);
    auto start = std::chrono::steady_clock::now();
    auto r = c.Get(s.addr(), "/");
    auto took = std::chrono::steady_clock::now() - start;
    CHECK(kelp::ErrnoOf(r.status()) == ETIMEDOUT);
    CHECK(took >= std::chrono::milliseconds(150));
    CHECK(took < std::chrono::seconds(10));
  }
  SECTION("a malformed response") {
    ScriptedServer s([](const std::string&, int) {
      return ScriptedServer::Reply{"SPDY/9 what\r\n\r\n", true};
    });
    HttpClient c;
    CHECK(c.Get(s.addr(), "/").status().code() == absl::StatusCode::kUnavailable);
  }
  SECTION("nothing listening") {
    HttpClient c;
    auto r = c.Get("127.0.0.1:" + std::to_string(DeadPort()), "/");
    CHECK(kelp::ErrnoOf(r.status()) == ECONNREFUSED);
  }
  SECTION("an address without a port") {
    HttpClient c;
    CHECK(c.Get("127.0.0.1", "/").status().code() == absl::StatusCode::kInvalidArgument);
  }
}
