#include "shared/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
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
  HttpServer server{[] { HttpServer::Options o; o.loop_threads = 2; o.worker_threads = 4; return o; }(), &handler};
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
  // A large body is read from the socket straight into the handler's buffer: no byte of the
  // request after it may go with it.
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  wire += "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n" + big;
  wire += "GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string out = Exchange(f.server.port(), wire);
  CHECK(CountOf(out, "HTTP/1.1 200 OK") == 23);
  CHECK(out.find("hello") != std::string::npos);
  size_t at = out.find(big);
  REQUIRE(at != std::string::npos);
  CHECK(out.find("hello") < at);
  CHECK(at < out.rfind("tiny"));
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

// ---- client faults are 4xx; limits (docs/reliability.md) ---------------------------------

namespace {

uint64_t Responses(const std::string& server, const char* cls) {
  return kelp::MetricsRegistry::Default()
      .GetCounter("kelp_http_responses_total", "", {{"server", server}, {"class", cls}})
      ->value();
}
uint64_t CounterOf(const char* name, const std::string& server) {
  return kelp::MetricsRegistry::Default().GetCounter(name, "", {{"server", server}})->value();
}

// Waits up to 10 s for cond; a condition, never a fixed sleep.
template <typename F>
bool Eventually(F cond) {
  for (int i = 0; i < 1000; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// Reads until the server closes (or 5 s pass).
std::string ReadToClose(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, n);
  return out;
}

struct LimitedFixture {
  TestHandler handler;
  HttpServer server;
  explicit LimitedFixture(HttpServer::Options o) : server(std::move(o), &handler) { REQUIRE(server.Start().ok()); }
  std::string addr() const { return "127.0.0.1:" + std::to_string(server.port()); }
};

}  // namespace

TEST_CASE("a body the client cuts short is answered and counted as a client error, not a 500") {
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 2; o.name = "t-cut"; return o; }());
  uint64_t c4 = Responses("t-cut", "4xx"), c5 = Responses("t-cut", "5xx");
  for (const char* wire : {"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\npartial",
                           "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nabc"}) {
    int fd = Dial(f.server.port());
    send(fd, wire, strlen(wire), MSG_NOSIGNAL);
    close(fd);
  }
  // A reset mid-body (RST instead of FIN) too.
  {
    int fd = Dial(f.server.port());
    std::string w = "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\npartial";
    send(fd, w.data(), w.size(), MSG_NOSIGNAL);
    linger lg{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
  }
  CHECK(Eventually([&] { return Responses("t-cut", "4xx") >= c4 + 3; }));
  CHECK(Responses("t-cut", "5xx") == c5);
  // A malformed chunked body is the client's fault as well, and says so.
  std::string out = Exchange(f.server.port(),
                             "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
  CHECK(out.find("HTTP/1.1 400") == 0);
  CHECK(Responses("t-cut", "5xx") == c5);
}

TEST_CASE("a request head sent byte by byte (slowloris) gets 408 and does not hold up others") {
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 2; o.name = "t-slow"; o.request_timeout_ms = 400; return o; }());
  uint64_t timeouts = CounterOf("kelp_http_timeouts_total", "t-slow");
  int fd = Dial(f.server.port());
  std::atomic<bool> stop{false};
  std::thread drip([&] {
    std::string head = "GET /small HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(1000, 'p');
    for (char ch : head) {
      if (stop || send(fd, &ch, 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // Others are served meanwhile.
  HttpClient client;
  for (int i = 0; i < 20; ++i) {
    auto r = client.Get(f.addr(), "/small");
    REQUIRE(r.ok());
    CHECK(r->body == "tiny");
  }
  std::string out = ReadToClose(fd);
  stop = true;
  drip.join();
  close(fd);
  CHECK(out.find("HTTP/1.1 408") == 0);
  CHECK(CounterOf("kelp_http_timeouts_total", "t-slow") > timeouts);
}

TEST_CASE("an idle keep-alive connection is closed after the idle timeout") {
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 2; o.name = "t-idle"; o.idle_timeout_ms = 300; return o; }());
  int fd = Dial(f.server.port());
  std::string req = "GET /small HTTP/1.1\r\nHost: x\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out = ReadToClose(fd);  // the answer, then the close once idle
  close(fd);
  CHECK(out.find("tiny") != std::string::npos);
  CHECK(out.find("408") == std::string::npos);
}

TEST_CASE("thousands of idle connections cannot lock other clients out") {
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 2; o.max_connections = 100; o.name = "t-many"; return o; }());
  uint64_t evicted = CounterOf("kelp_http_connections_evicted_total", "t-many");
  std::vector<int> hogs;
  for (int i = 0; i < 1000; ++i) hogs.push_back(Dial(f.server.port()));
  // Each new client evicts an idle hog: the server stays at its limit and keeps serving.
  for (int i = 0; i < 20; ++i) {
    HttpClient client;
    auto r = client.Get(f.addr(), "/small");
    REQUIRE(r.ok());
    CHECK(r->body == "tiny");
  }
  CHECK(CounterOf("kelp_http_connections_evicted_total", "t-many") >= evicted + 20);
  CHECK(kelp::MetricsRegistry::Default().GetGauge("kelp_http_connections", "", {{"server", "t-many"}})->value() <= 100);
  for (int fd : hogs) close(fd);
}

TEST_CASE("a streamed body slower than the minimum rate gets 408 and frees its worker") {
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 1; o.name = "t-rate"; o.request_timeout_ms = 300; o.body_min_rate = 1 << 20; return o; }());
  int fd = Dial(f.server.port());
  std::string head = "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n";
  send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::atomic<bool> stop{false};
  std::thread drip([&] {
    while (!stop && send(fd, "0123456789", 10, MSG_NOSIGNAL) == 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::string out = ReadToClose(fd);
  stop = true;
  drip.join();
  close(fd);
  CHECK(out.find("HTTP/1.1 408") == 0);
  // The one worker is free again.
  HttpClient client;
  auto r = client.Do("PUT", f.addr(), "/echo", {}, "after");
  REQUIRE(r.ok());
  CHECK(r->body == "after");
}

TEST_CASE("a 10 GiB Content-Length or an endless chunked body is refused without buffering it") {
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 2; o.name = "t-huge"; return o; }());
  std::string out = Exchange(f.server.port(), "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10737418240\r\n\r\nabc",
                             false);
  CHECK(out.find("HTTP/1.1 413") == 0);
  // Chunked: the handler's limit (16 MiB) stops it part way.
  int fd = Dial(f.server.port());
  std::string head = "PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  std::string chunk = "10000\r\n" + std::string(0x10000, 'z') + "\r\n";
  std::thread feed([&] {
    for (int i = 0; i < 1024; ++i) {  // up to 64 MiB
      if (send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(chunk.size())) break;
    }
  });
  std::string resp = ReadToClose(fd);
  shutdown(fd, SHUT_RDWR);
  feed.join();
  close(fd);
  CHECK(resp.find("HTTP/1.1 413") == 0);
}

TEST_CASE("out of file descriptors the server neither spins nor stops serving") {
#if defined(__SANITIZE_THREAD__)
  WARN("skipped under TSan: its runtime takes descriptors of its own after the count");
  return;
#endif
  LimitedFixture f([] { HttpServer::Options o; o.loop_threads = 1; o.worker_threads = 1; o.name = "t-emfile"; return o; }());
  // Room for a few more descriptors than are open, no more (new ones take the lowest free
  // numbers, and the limit bounds the number). Or room for none at all: then not even the
  // server's spare descriptor can take a pending connection, and the loop must still sleep.
  const bool no_room = GENERATE(false, true);
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  int open_fds = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++open_fds;
  rlimit old;
  REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = no_room ? 3 : open_fds + 8;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  uint64_t refused = CounterOf("kelp_http_connections_refused_total", "t-emfile");
  // The clients live in a child process: their descriptors do not count against ours.
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Async-signal-safe calls only: a thread of the parent may have held malloc's lock at the
    // fork, and a child that allocates could then hang.
    rlimit high = old;
    setrlimit(RLIMIT_NOFILE, &high);
    int fds[50];
    int held = 0;
    for (int i = 0; i < 50; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(f.server.port());
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) fds[held++] = fd;
    }
    (void)fds;
    (void)!write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  char c;
  REQUIRE(read(ready[0], &c, 1) == 1);
  if (!no_room) {
    CHECK(Eventually([&] { return CounterOf("kelp_http_connections_refused_total", "t-emfile") > refused; }));
  }
  // A spinning event loop would burn a core here.
  rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  getrusage(RUSAGE_SELF, &after);
  auto cpu_ms = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000 + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1000;
  };
  CHECK(cpu_ms(after) - cpu_ms(before) < 300);
  if (no_room) REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  // Descriptors come back as the dead clients' connections close; service resumes.
  CHECK(Eventually([&] {
    HttpClient client;
    auto r = client.Get(f.addr(), "/small");
    return r.ok() && r->body == "tiny";
  }));
  REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
}
