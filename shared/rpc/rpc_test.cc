// shared/rpc end to end on loopback: a Server with echo, failing, slow and streaming methods,
// and Channels calling it from many threads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <google/protobuf/wrappers.pb.h>

#include "shared/http/http_server.h"
#include "shared/rpc/caller.h"
#include "shared/rpc/client.h"
#include "shared/rpc/server.h"
#include "shared/security/security_config.h"
#include "shared/security/testing/test_pki.h"
#include "shared/security/tls.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::rpc {
namespace {

using google::protobuf::StringValue;
using google::protobuf::UInt64Value;
using namespace std::chrono_literals;

enum : uint16_t {
  kEcho = 1,
  kEchoWorker = 2,
  kFail = 3,
  kSlow = 4,
  kCount = 5,
  kForever = 6,
  kCaller = 7,
  kCallerWorker = 8
};

struct TestServer {
  Service service;
  std::unique_ptr<Server> server;
  int port = 0;
  std::atomic<bool> forever_cancelled{false};
  std::atomic<int> slow_calls{0};

  explicit TestServer(int loops = 2, std::shared_ptr<SSL_CTX> tls = nullptr) {
    service.AddUnary<StringValue, StringValue>(kEcho, "Echo", [](const StringValue& req, StringValue* resp) {
      resp->set_value(req.value());
      return absl::OkStatus();
    });
    service.AddUnary<StringValue, StringValue>(
        kEchoWorker, "EchoWorker",
        [](const StringValue& req, StringValue* resp) {
          resp->set_value("w:" + req.value());
          return absl::OkStatus();
        },
        [](const StringValue&) { return Exec::kWorker; });
    service.AddUnary<StringValue, StringValue>(kFail, "Fail", [](const StringValue& req, StringValue*) {
      if (req.value() == "throw") throw std::runtime_error("boom");
      return PosixError(ENOTEMPTY, "not empty: " + req.value());
    });
    service.AddUnary<UInt64Value, UInt64Value>(
        kSlow, "Slow",
        [this](const UInt64Value& req, UInt64Value* resp) {
          ++slow_calls;
          std::this_thread::sleep_for(std::chrono::milliseconds(req.value()));
          resp->set_value(req.value());
          return absl::OkStatus();
        },
        [](const UInt64Value&) { return Exec::kWorker; });
    auto caller = [](const UInt64Value&, UInt64Value* resp) {
      resp->set_value(CallerId());
      return absl::OkStatus();
    };
    service.AddUnary<UInt64Value, UInt64Value>(kCaller, "Caller", caller);
    service.AddUnary<UInt64Value, UInt64Value>(kCallerWorker, "CallerWorker", caller,
                                               [](const UInt64Value&) { return Exec::kWorker; });
    service.AddStream<UInt64Value>(kCount, "Count", [](const UInt64Value& req, StreamWriter& w) {
      for (uint64_t i = 0; i < req.value(); ++i) {
        UInt64Value v;
        v.set_value(i);
        if (!w.Write(v)) return absl::CancelledError("gone");
      }
      return absl::OkStatus();
    });
    service.AddStream<UInt64Value>(kForever, "Forever", [this](const UInt64Value&, StreamWriter& w) {
      UInt64Value v;
      v.set_value(1);
      w.Write(v);
      while (!w.cancelled()) std::this_thread::sleep_for(5ms);
      forever_cancelled = true;
      return absl::CancelledError("cancelled");
    });
    Server::Options o;
    o.loop_threads = loops;
    o.name = "rpc-test";
    o.metric_prefix = "kelp_rpc_test";
    o.tls = std::move(tls);
    server = std::make_unique<Server>(o, &service);
    REQUIRE(server->Start().ok());
    auto p = server->Listen("127.0.0.1", 0);
    REQUIRE(p.ok());
    port = *p;
  }
  std::string address() const { return kelp::StrCat("127.0.0.1:", port); }
};

absl::StatusOr<std::string> Echo(Channel& ch, std::string_view v, uint16_t method = kEcho) {
  StringValue req, resp;
  req.set_value(std::string(v));
  RETURN_IF_ERROR(ch.Call(method, req, &resp, 5s));
  return resp.value();
}

TEST_CASE("rpc: unary calls from many threads each get their own reply") {
  TestServer ts;
  Channel ch(ts.address(), {});
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        std::string v = kelp::StrCat("t", t, "-", i, std::string(i % 7 * 100, 'x'));
        uint16_t m = i % 3 == 0 ? kEchoWorker : kEcho;
        auto r = Echo(ch, v, m);
        if (!r.ok() || *r != (m == kEchoWorker ? "w:" + v : v)) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
  CHECK(ch.connects() == 1);
}

TEST_CASE("rpc: errors arrive with their code and errno, a throwing handler is INTERNAL") {
  TestServer ts;
  Channel ch(ts.address(), {});
  StringValue req, resp;
  req.set_value("d");
  absl::Status s = ch.Call(kFail, req, &resp, 5s);
  CHECK(ErrnoOf(s) == ENOTEMPTY);
  CHECK(s.message() == "not empty: d");
  req.set_value("throw");
  s = ch.Call(kFail, req, &resp, 5s);
  CHECK(s.code() == absl::StatusCode::kInternal);
  CHECK(ch.Call(99, req, &resp, 5s).code() == absl::StatusCode::kUnimplemented);
  // The connection survived all three.
  CHECK(*Echo(ch, "still") == "still");
  CHECK(ch.connects() == 1);
}

TEST_CASE("rpc: large payloads both ways") {
  TestServer ts;
  Channel ch(ts.address(), {});
  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 31 + 7) % 26);
  auto r = Echo(ch, big);
  REQUIRE(r.ok());
  CHECK(*r == big);
}

// CPU ticks (utime + stime) of this process's threads whose name starts with prefix.
long ThreadTicks(std::string_view prefix) {
  long total = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) != 0) continue;
    std::ifstream stat(t.path() / "stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream rest(line.substr(line.rfind(')') + 2));  // after "pid (comm) "
    std::string field;
    long utime = 0, stime = 0;
    for (int i = 3; rest >> field; ++i) {  // field 3 is the state
      if (i == 14) utime = std::stol(field);
      if (i == 15) {
        stime = std::stol(field);
        break;
      }
    }
    total += utime + stime;
  }
  return total;
}

TEST_CASE("rpc: a reply that filled the socket leaves the loop idle once it is sent") {
  TestServer ts;
  Channel ch(ts.address(), {});
  std::string big(8 << 20, 'x');  // more than the socket takes at once: EPOLLOUT gets armed
  for (int i = 0; i < 3; ++i) REQUIRE(Echo(ch, big).ok());
  REQUIRE(*Echo(ch, "small") == "small");
  long before = ThreadTicks("rpc-test-l");
  std::this_thread::sleep_for(1s);
  long used = ThreadTicks("rpc-test-l") - before;
  INFO("the loops used " << used << " ticks of " << sysconf(_SC_CLK_TCK) << " per second while idle");
  CHECK(used < sysconf(_SC_CLK_TCK) / 10);  // a loop spinning on EPOLLOUT burns the whole second
}

TEST_CASE("rpc: a call past its deadline fails alone and the connection goes on") {
  TestServer ts;
  Channel ch(ts.address(), {});
  UInt64Value req, resp;
  req.set_value(500);
  auto t0 = std::chrono::steady_clock::now();
  absl::Status s = ch.Call(kSlow, req, &resp, 100ms);
  CHECK(s.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::chrono::steady_clock::now() - t0 < 400ms);
  CHECK(*Echo(ch, "after") == "after");
  req.set_value(1);
  CHECK(ch.Call(kSlow, req, &resp, 5s).ok());
  CHECK(resp.value() == 1);
}

TEST_CASE("rpc: a slow call does not hold up quick ones on the same connection") {
  TestServer ts(1);
  Channel ch(ts.address(), {});
  absl::Status slow_status;  // checked on this thread: Catch's assertions are not thread-safe
  std::thread slow([&] {
    UInt64Value req, resp;
    req.set_value(300);
    slow_status = ch.Call(kSlow, req, &resp, 5s);
  });
  while (ts.slow_calls.load() == 0) std::this_thread::sleep_for(1ms);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) CHECK(Echo(ch, "q").ok());
  CHECK(std::chrono::steady_clock::now() - t0 < 250ms);
  slow.join();
  CHECK(slow_status.ok());
}

TEST_CASE("rpc: a caller alone polls for a quick reply, not for a method whose replies are slow") {
  TestServer ts;
  Channel::Options o;
  o.reply_poll = 20ms;  // long, so that a loaded machine still answers an echo within it
  Channel ch(ts.address(), o);
  for (int i = 0; i < 20; ++i) CHECK(*Echo(ch, kelp::StrCat("p", i)) == kelp::StrCat("p", i));
  CHECK(ch.reply_polls() == 20);
  // The first echo is polled for the whole 20 ms (its method's time is not known yet), in which
  // it is surely answered; the next ones for three times what they took.
  CHECK(ch.replies_polled() >= 1);

  // A method not seen yet is polled for once; its reply took 60 ms, more than twice the poll,
  // so the next calls sleep at once.
  UInt64Value req, resp;
  req.set_value(60);
  const uint64_t polls = ch.reply_polls(), caught = ch.replies_polled();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(ch.Call(kSlow, req, &resp, 5s).ok());
    CHECK(resp.value() == 60);
  }
  CHECK(ch.reply_polls() == polls + 1);
  CHECK(ch.replies_polled() == caught);
  // Quick calls are still polled for.
  CHECK(*Echo(ch, "again") == "again");
  CHECK(ch.reply_polls() == polls + 2);

  Channel never(ts.address(), {});
  for (int i = 0; i < 5; ++i) CHECK(*Echo(never, "x") == "x");
  CHECK(never.reply_polls() == 0);
}

TEST_CASE("rpc: blocking calls beyond the loop's followers run at once on workers, and quick ones still pass") {
  // One loop: its thread keeps a blocking call and hands the loop to one of its followers,
  // until none is left; the rest go to the worker pool. All run at the same time.
  TestServer ts(1);
  Channel ch(ts.address(), {});
  constexpr int kCalls = 8;
  std::vector<absl::Status> status(kCalls);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> slow;
  for (int i = 0; i < kCalls; ++i) {
    slow.emplace_back([&, i] {
      UInt64Value req, resp;
      req.set_value(400);
      status[i] = ch.Call(kSlow, req, &resp, 10s);
    });
  }
  while (ts.slow_calls.load() < kCalls && std::chrono::steady_clock::now() - t0 < 5s) {
    std::this_thread::sleep_for(1ms);
  }
  CHECK(ts.slow_calls.load() == kCalls);
  for (int i = 0; i < 10; ++i) {
    CHECK(*Echo(ch, "q") == "q");
    CHECK(*Echo(ch, "q", kEchoWorker) == "w:q");
  }
  for (auto& t : slow) t.join();
  // One after another they would take 3.2 s.
  CHECK(std::chrono::steady_clock::now() - t0 < 2400ms);
  for (const auto& s : status) CHECK(s.ok());
}

// A kCount stream of count messages: each arrives, in order, then a clean end.
void ExpectCountStream(Channel& ch, uint64_t count) {
  UInt64Value req;
  req.set_value(count);
  auto st = ch.OpenStream(kCount, req, 5s);
  REQUIRE(st.ok());
  UInt64Value v;
  uint64_t n = 0;
  while ((*st)->Next(&v)) {
    REQUIRE(v.value() == n);
    ++n;
  }
  CHECK(n == count);
  CHECK((*st)->Finish().ok());
}

TEST_CASE("rpc: streams deliver every message in order, end cleanly, and can be cancelled") {
  TestServer ts;
  Channel ch(ts.address(), {});
  ExpectCountStream(ch, 10000);
  UInt64Value req;
  req.set_value(10000);
  UInt64Value v;

  auto f = ch.OpenStream(kForever, req, 5s);
  REQUIRE(f.ok());
  REQUIRE((*f)->Next(&v));
  std::thread canceller([&] {
    // Once the reader is blocked in Next (the server sends nothing more), not before.
    while (!(*f)->blocked()) std::this_thread::sleep_for(1ms);
    (*f)->Cancel();
  });
  CHECK_FALSE((*f)->Next(&v));
  CHECK((*f)->Finish().code() == absl::StatusCode::kCancelled);
  canceller.join();
  for (int i = 0; i < 200 && !ts.forever_cancelled; ++i) std::this_thread::sleep_for(10ms);
  CHECK(ts.forever_cancelled);
  // Unary calls on the channel were never disturbed.
  CHECK(*Echo(ch, "x") == "x");
}

TEST_CASE("rpc: a server going away fails calls in flight and the next call reconnects") {
  auto ts = std::make_unique<TestServer>();
  int port = ts->port;
  Channel ch(ts->address(), {});
  REQUIRE(*Echo(ch, "a") == "a");
  absl::Status slow_status;
  std::thread slow([&] {
    UInt64Value req, resp;
    req.set_value(1000);
    slow_status = ch.Call(kSlow, req, &resp, 10s);
  });
  while (ts->slow_calls.load() == 0) std::this_thread::sleep_for(1ms);
  ts->server->Stop();
  slow.join();
  CHECK(slow_status.code() == absl::StatusCode::kUnavailable);
  CHECK(Echo(ch, "b").status().code() == absl::StatusCode::kUnavailable);  // nobody listens

  // A new server on the same port: the channel connects again by itself.
  Service service;
  service.AddUnary<StringValue, StringValue>(kEcho, "Echo", [](const StringValue& r, StringValue* o) {
    o->set_value("new:" + r.value());
    return absl::OkStatus();
  });
  Server::Options o;
  o.metric_prefix = "kelp_rpc_test2";
  Server s2(o, &service);
  REQUIRE(s2.Start().ok());
  auto p = s2.Listen("127.0.0.1", port);
  REQUIRE(p.ok());
  CHECK(*Echo(ch, "c") == "new:c");
  CHECK(ch.connects() == 2);
}

int RawConnect(int port) {
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

std::string ReadUntilClosed(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, n);
  return out;
}

TEST_CASE("rpc: garbage gets the connection closed, never the server") {
  TestServer ts;
  SECTION("not an upgrade") {
    int fd = RawConnect(ts.port);
    std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    send(fd, req.data(), req.size(), 0);
    std::string got = ReadUntilClosed(fd);
    CHECK(got.rfind("HTTP/1.1 400", 0) == 0);
    close(fd);
  }
  SECTION("a malformed frame after the upgrade") {
    int fd = RawConnect(ts.port);
    std::string req = "GET /rpc HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: kelp-rpc/1\r\n\r\n";
    req += std::string("\x02\x00\x00\x00garbage", 11);
    send(fd, req.data(), req.size(), 0);
    std::string got = ReadUntilClosed(fd);
    CHECK(got.rfind("HTTP/1.1 101", 0) == 0);
    close(fd);
  }
  SECTION("a request that is not the method's message") {
    Channel ch(ts.address(), {});
    auto r = ch.CallRaw(kEcho, std::string("\xff\xff\xff", 3), 5s);
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  }
  Channel ch(ts.address(), {});
  CHECK(*Echo(ch, "alive") == "alive");
}

absl::StatusOr<uint64_t> CallerOf(Channel& ch, uint16_t method) {
  UInt64Value req, resp;
  RETURN_IF_ERROR(ch.Call(method, req, &resp, 5s));
  return resp.value();
}

TEST_CASE("rpc: calls run with the Kelp-Client id their connection named, inline and on workers") {
  TestServer ts;
  Channel::Options named;
  named.upgrade_headers = [] { return ClientIdHeader(0xfeedc0de); };
  Channel a(ts.address(), named), b(ts.address(), {});
  for (int i = 0; i < 20; ++i) {
    CHECK(*CallerOf(a, kCaller) == 0xfeedc0de);
    CHECK(*CallerOf(a, kCallerWorker) == 0xfeedc0de);
    CHECK(*CallerOf(b, kCaller) == 0);
    CHECK(*CallerOf(b, kCallerWorker) == 0);
  }
  CHECK(CallerId() == 0);  // outside a call
  SECTION("a malformed id is refused") {
    int fd = RawConnect(ts.port);
    std::string req =
        "GET /rpc HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: kelp-rpc/1\r\n"
        "Kelp-Client: not-hex\r\n\r\n";
    send(fd, req.data(), req.size(), 0);
    std::string got = ReadUntilClosed(fd);
    CHECK(got.rfind("HTTP/1.1 400", 0) == 0);
    CHECK(got.find("Kelp-Client") != std::string::npos);
    close(fd);
  }
}

TEST_CASE("rpc: a blocking call in the same packet as a new connection's upgrade is answered at once") {
  // The loop's thread keeps the call while accepting the connection, and must let the loop go
  // to run it rather than wait in epoll_wait for another event.
  TestServer ts(1);
  int fd = RawConnect(ts.port);
  std::string packet = "GET /rpc HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: kelp-rpc/1\r\n\r\n";
  UInt64Value req;
  req.set_value(1);
  std::string payload = req.SerializeAsString();
  char header[kFrameHeaderSize];
  EncodeFrameHeader(header, FrameType::kRequest, kSlow, 7, payload.size());
  packet += std::string(header, sizeof header) + payload;
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(send(fd, packet.data(), packet.size(), 0) == static_cast<ssize_t>(packet.size()));
  std::string got;
  char buf[4096];
  FrameHeader h;
  size_t head_end = std::string::npos;
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    got.append(buf, static_cast<size_t>(n));
    head_end = got.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    auto size = DecodeFrame(std::string_view(got).substr(head_end + 4), kDefaultMaxPayload, &h);
    REQUIRE(size.ok());
    if (*size > 0) break;
  }
  CHECK(got.rfind("HTTP/1.1 101", 0) == 0);
  CHECK(h.type == FrameType::kReply);
  CHECK(h.id == 7);
  CHECK(std::chrono::steady_clock::now() - t0 < 500ms);  // not after epoll_wait's 1 s timeout
  close(fd);
}

TEST_CASE("rpc: an HTTP server hands upgraded connections over") {
  Service service;
  service.AddUnary<StringValue, StringValue>(kEcho, "Echo", [](const StringValue& r, StringValue* o) {
    o->set_value(r.value());
    return absl::OkStatus();
  });
  service.AddUnary<UInt64Value, UInt64Value>(kCaller, "Caller",
                                             [](const UInt64Value&, UInt64Value* o) {
                                               o->set_value(CallerId());
                                               return absl::OkStatus();
                                             });
  Server::Options ro;
  ro.metric_prefix = "kelp_rpc_test3";
  Server rpc(ro, &service);
  REQUIRE(rpc.Start().ok());
  struct Plain : http::Handler {
    void Handle(http::Request&, http::ResponseWriter& w) override { w.Send(200, "plain"); }
  } plain;
  http::HttpServer::Options ho;
  ho.loop_threads = 1;
  ho.upgrades[std::string(kUpgradeProtocol)] = [&rpc](int fd, std::string initial,
                                                      const http::Request& req) {
    rpc.Adopt(fd, std::move(initial), ParseClientId(req.header(kClientHeader)).value_or(0));
  };
  http::HttpServer hs(ho, &plain);
  REQUIRE(hs.Start().ok());
  Channel ch(kelp::StrCat("127.0.0.1:", hs.port()), {});
  for (int i = 0; i < 100; ++i) REQUIRE(*Echo(ch, kelp::StrCat(i)) == kelp::StrCat(i));
  CHECK(rpc.connections() == 1);
  CHECK(*CallerOf(ch, kCaller) == 0);
  Channel::Options named;
  named.upgrade_headers = [] { return ClientIdHeader(42); };
  Channel ch2(kelp::StrCat("127.0.0.1:", hs.port()), named);
  CHECK(*CallerOf(ch2, kCaller) == 42);  // the header came through the HTTP server's upgrade
  hs.Stop();
  rpc.Stop();
}

// ---- TLS (docs/security.md: the metadata transport is mutual TLS with [grpc] certificates) ----

struct Pki {
  std::string dir;
  security::testing::TestPki pki;
  security::SecurityConfig cfg;
  Pki() {
    dir = (std::filesystem::temp_directory_path() / kelp::StrCat("kelp-rpc-tls-", getpid())).string();
    std::filesystem::create_directories(dir);
    auto p = security::testing::MakeTestPki(dir);
    REQUIRE(p.ok());
    pki = *p;
    security::testing::TomlOptions o;
    o.pki = &pki;
    auto c = security::ParseSecurityConfig(security::testing::SecurityToml(o), "test.toml");
    REQUIRE(c.ok());
    cfg = *c;
  }
  ~Pki() { std::filesystem::remove_all(dir); }
  std::shared_ptr<SSL_CTX> ServerCtx() const { return Ctx(cfg, security::kFilerComponent, true); }
  std::shared_ptr<SSL_CTX> ClientCtx() const { return Ctx(cfg, security::kClientComponent, false); }
  // A client presenting the rogue certificate (another CA signed it); trusting rogue_ca too
  // when trust_rogue (then it also refuses the real server's certificate).
  std::shared_ptr<SSL_CTX> Rogue(bool trust_rogue) const {
    security::SecurityConfig c = cfg;
    c.grpc[std::string(security::kClientComponent)] = {pki.Cert("rogue"), pki.Key("rogue")};
    if (trust_rogue) c.grpc_ca = dir + "/rogue_ca.crt";
    return Ctx(c, security::kClientComponent, false);
  }
  static std::shared_ptr<SSL_CTX> Ctx(const security::SecurityConfig& c, std::string_view component, bool server) {
    auto ctx = server ? security::NewServerSslCtx(c, component) : security::NewClientSslCtx(c, component);
    REQUIRE(ctx.ok());
    REQUIRE(*ctx != nullptr);
    return std::shared_ptr<SSL_CTX>(std::move(*ctx));
  }
};

Channel::Options TlsOptions(std::shared_ptr<SSL_CTX> ctx) {
  Channel::Options o;
  o.tls = std::move(ctx);
  return o;
}

TEST_CASE("rpc over TLS: calls from many threads, large payloads and streams arrive intact") {
  Pki pki;
  TestServer ts(2, pki.ServerCtx());
  Channel ch(ts.address(), TlsOptions(pki.ClientCtx()));
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        std::string v = kelp::StrCat("t", t, "-", i, std::string(i % 11 * 3000, 'y'));  // up to 2 TLS records
        uint16_t m = i % 3 == 0 ? kEchoWorker : kEcho;
        auto r = Echo(ch, v, m);
        if (!r.ok() || *r != (m == kEchoWorker ? "w:" + v : v)) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
  CHECK(ch.connects() == 1);

  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 31 + 7) % 26);
  auto r = Echo(ch, big);
  REQUIRE(r.ok());
  CHECK(*r == big);

  ExpectCountStream(ch, 10000);

  // Errors keep their code and errno inside TLS too.
  StringValue sreq, sresp;
  sreq.set_value("d");
  CHECK(ErrnoOf(ch.Call(kFail, sreq, &sresp, 5s)) == ENOTEMPTY);
}

TEST_CASE("rpc over TLS: a client without a certificate of the CA gets no answer") {
  Pki pki;
  TestServer ts(1, pki.ServerCtx());
  // Signed by another CA: the server refuses it (with TLS 1.3 the client learns it at its first read).
  Channel rogue(ts.address(), TlsOptions(pki.Rogue(false)));
  CHECK(Echo(rogue, "let me in").status().code() == absl::StatusCode::kUnavailable);
  // Trusting another CA: the client refuses the server's certificate.
  Channel distrust(ts.address(), TlsOptions(pki.Rogue(true)));
  absl::Status s = distrust.Connect(5s);
  INFO(std::string(s.message()));
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(s.message()).find("certificate verify failed") != std::string::npos);
  // No TLS at all: the frames are not a ClientHello, the server closes.
  Channel plain(ts.address(), {});
  CHECK(Echo(plain, "plain").status().code() == absl::StatusCode::kUnavailable);
  // A TLS client against a plaintext server fails too, rather than talking in the clear.
  TestServer plain_server(1);
  Channel tls_to_plain(plain_server.address(), TlsOptions(pki.ClientCtx()));
  CHECK_FALSE(Echo(tls_to_plain, "x").ok());
  // The server goes on serving good clients.
  Channel good(ts.address(), TlsOptions(pki.ClientCtx()));
  CHECK(*Echo(good, "fine") == "fine");
}

TEST_CASE("rpc over TLS: connections an HTTP server upgraded run TLS after the 101") {
  Pki pki;
  Service service;
  service.AddUnary<StringValue, StringValue>(kEcho, "Echo", [](const StringValue& r, StringValue* o) {
    o->set_value(r.value());
    return absl::OkStatus();
  });
  Server::Options ro;
  ro.metric_prefix = "kelp_rpc_test4";
  ro.tls = pki.ServerCtx();
  Server rpc(ro, &service);
  REQUIRE(rpc.Start().ok());
  struct Plain : http::Handler {
    void Handle(http::Request&, http::ResponseWriter& w) override { w.Send(200, "plain"); }
  } plain;
  http::HttpServer::Options ho;
  ho.loop_threads = 1;
  ho.upgrades[std::string(kUpgradeProtocol)] = [&rpc](int fd, std::string initial,
                                                      const http::Request&) {
    rpc.Adopt(fd, std::move(initial));
  };
  http::HttpServer hs(ho, &plain);
  REQUIRE(hs.Start().ok());
  Channel ch(kelp::StrCat("localhost:", hs.port()), TlsOptions(pki.ClientCtx()));  // a DNS name of the certificate
  for (int i = 0; i < 100; ++i) REQUIRE(*Echo(ch, kelp::StrCat(i)) == kelp::StrCat(i));
  CHECK(ch.connects() == 1);
  // What crosses the wire after the 101 is not the frames in the clear.
  int fd = RawConnect(hs.port());
  std::string req = "GET /rpc HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: kelp-rpc/1\r\n\r\n";
  send(fd, req.data(), req.size(), 0);
  req = std::string("\x0c\x00\x00\x00\x01\x00\x01\x00\x01\x00\x00\x00\x00\x00\x00\x00", 16);  // an empty REQUEST
  send(fd, req.data(), req.size(), 0);
  std::string got = ReadUntilClosed(fd);
  CHECK(got.rfind("HTTP/1.1 101", 0) == 0);
  // After the 101: at most a TLS alert (content type 21), never a reply frame; then closed.
  std::string rest = got.substr(got.find("\r\n\r\n") + 4);
  CHECK((rest.empty() || rest[0] == '\x15'));
  close(fd);
  hs.Stop();
  rpc.Stop();
}

}  // namespace
}  // namespace kelp::rpc
