#include "shared/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "shared/http/http_client.h"

using namespace kelp::http;

namespace {

// Echo-ish handler: GET /small inline, /echo reads and returns the body (blocking mode),
// /stream writes a chunked body, /head-only answers HEAD with a length.
class TestHandler : public Handler {
 public:
  bool RunInline(const Request& req) const override { return req.path() == "/small" || req.path() == "/inline-echo"; }
  void Handle(Request& req, ResponseWriter& w) override {
    calls.fetch_add(1);
    if (req.path() == "/small") {
      w.Send(200, "tiny");
    } else if (req.path() == "/echo" || req.path() == "/inline-echo") {
      auto body = req.ReadAll(1 << 24);
      if (!body.ok()) {
        w.SendStatus(body.status());
        return;
      }
      w.Send(200, *body);
    } else if (req.path() == "/stream") {
      REQUIRE(w.WriteHead(200, {}, -1).ok());
      for (int i = 0; i < 100; ++i) REQUIRE(w.Write(std::string(1000, 'a' + i % 26)).ok());
    } else if (req.path() == "/throw") {
      throw std::runtime_error("boom");
    } else if (req.path() == "/nothing") {
    } else {
      w.SendError(404, "no such thing");
    }
  }
  std::atomic<int> calls{0};
};

int Dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string Exchange(int port, const std::string& wire, bool half_close = true) {
  int fd = Dial(port);
  REQUIRE(send(fd, wire.data(), wire.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(wire.size()));
  if (half_close) shutdown(fd, SHUT_WR);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, n);
  close(fd);
  return out;
}

struct Fixture {
  TestHandler handler;
  HttpServer server{HttpServer::Options{.loop_threads = 2, .worker_threads = 4}, &handler};
  Fixture() { REQUIRE(server.Start().ok()); }
  std::string addr() const { return "127.0.0.1:" + std::to_string(server.port()); }
};

int CountOf(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("client and server talk keep-alive in both modes") {
  Fixture f;
  HttpClient client;
  for (int i = 0; i < 50; ++i) {
    auto r = client.Get(f.addr(), "/small");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK(r->body == "tiny");
    std::string payload(100000 + i, 'x');
    auto e = client.Do("PUT", f.addr(), "/echo", {}, payload);
    REQUIRE(e.ok());
    CHECK(e->body == payload);
  }
  auto s = client.Get(f.addr(), "/stream");
  REQUIRE(s.ok());
  CHECK(s->body.size() == 100000);
  CHECK(s->body[1000] == 'b');
}

TEST_CASE("pipelined requests are answered in order") {
  Fixture f;
  std::string wire;
  for (int i = 0; i < 20; ++i) wire += "GET /small HTTP/1.1\r\nHost: x\r\n\r\n";
  wire += "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  wire += "GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string out = Exchange(f.server.port(), wire);
  CHECK(CountOf(out, "HTTP/1.1 200 OK") == 22);
  CHECK(out.find("hello") != std::string::npos);
  CHECK(out.find("hello") < out.rfind("tiny"));
}

TEST_CASE("chunked request bodies and expect-continue") {
  Fixture f;
  std::string out = Exchange(f.server.port(),
                             "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                             "Connection: close\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  CHECK(out.find("Content-Length: 5") != std::string::npos);
  CHECK(out.find("abcde") != std::string::npos);
  // The client sends the head, waits for 100 Continue, then the body.
  for (const char* path : {"/inline-echo", "/echo"}) {
    int fd = Dial(f.server.port());
    std::string head = std::string("PUT ") + path +
                       " HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\n";
    send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    CHECK(std::string(buf, n).find("100 Continue") != std::string::npos);
    send(fd, "xyz", 3, MSG_NOSIGNAL);
    std::string rest;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) rest.append(buf, n);
    close(fd);
    CHECK(rest.find("200 OK") != std::string::npos);
    CHECK(rest.find("xyz") != std::string::npos);
  }
}

TEST_CASE("garbage, oversize heads and handler failures get 4xx/5xx and the server stays up") {
  Fixture f;
  static constexpr char kTlsHello[] = "\x16\x03\x01\x00\xff garbage\r\n\r\n";  // has a NUL inside
  CHECK(Exchange(f.server.port(), std::string(kTlsHello, sizeof(kTlsHello) - 1)).find("400") != std::string::npos);
  CHECK(Exchange(f.server.port(), "GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(100000, 'a') + "\r\n\r\n")
            .find("431") != std::string::npos);
  CHECK(Exchange(f.server.port(), "GET /throw HTTP/1.1\r\nHost: x\r\n\r\n").find("500") != std::string::npos);
  CHECK(Exchange(f.server.port(), "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n").find("500") != std::string::npos);
  CHECK(Exchange(f.server.port(), "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n").find("400") !=
        std::string::npos);
  // A client that disappears mid-body does not hurt anyone.
  {
    int fd = Dial(f.server.port());
    std::string w = "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\npartial";
    send(fd, w.data(), w.size(), MSG_NOSIGNAL);
    close(fd);
  }
  HttpClient client;
  auto r = client.Get(f.addr(), "/small");
  REQUIRE(r.ok());
  CHECK(r->body == "tiny");
  auto nf = client.Get(f.addr(), "/missing");
  REQUIRE(nf.ok());
  CHECK(nf->status == 404);
  CHECK(nf->body.find("\"error\"") != std::string::npos);
}

TEST_CASE("HEAD responses carry a length but no body") {
  Fixture f;
  std::string out = Exchange(f.server.port(), "HEAD /small HTTP/1.1\r\nHost: x\r\n\r\nGET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(CountOf(out, "Content-Length: 4") == 2);
  CHECK(CountOf(out, "tiny") == 1);
}

TEST_CASE("many concurrent clients") {
  Fixture f;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  HttpClient client;
  for (int t = 0; t < 16; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto r = client.Do("PUT", f.addr(), i % 2 ? "/echo" : "/inline-echo", {}, "payload");
        if (r.ok() && r->body == "payload") ok.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  CHECK(ok.load() == 16 * 200);
  f.server.Stop();
  CHECK_FALSE(client.Get(f.addr(), "/small").ok());
}
