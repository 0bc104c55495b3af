// An RPC server for protobuf messages in length-prefixed frames (shared/rpc/frame.h,
// docs/rpc-protocol.md), many calls in flight on one connection: MooseFS's shape, built so a
// metadata call costs tens of microseconds on a small machine, where gRPC's synchronous server
// spends hundreds switching threads.
//
// Threads: `loop_threads` epoll loops own the connections. A method registered kInline runs on
// the loop that read its frame, and its reply joins the other replies of that read in one
// send(): no hand-off, no thread switch. Methods that may block (a WAL sync, an RPC to
// another server, a long listing) run off the loop: the loop's thread keeps the first such
// call of a read and hands the loop to a follower thread of its own (leader/follower), so
// the call does not wait for a thread to wake; the others, and all of them when no follower
// is free, go to a worker pool. Streams get a thread of their own for their lifetime.
// Handlers run concurrently on many threads and must be thread-safe; an exception from one is
// caught and answered INTERNAL.
//
// Connections arrive through Adopt() (an HTTP server upgraded them: the filer serves this on
// its HTTP port) or through the server's own listener (Listen(): tests and benchmarks).
//
// With Options::tls (mutual TLS from security.toml's [grpc] sections, docs/security.md) every
// connection runs a TLS handshake right after the 101 and its frames travel inside TLS; a
// client whose certificate the CA did not sign fails the handshake and is closed. Without it
// the connection is plain TCP, with no TLS code on its path.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <google/protobuf/message_lite.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/rpc/frame.h"
#include "shared/thread_pool.h"

namespace kelp::rpc {

class ServerConn;
struct StreamControl;

// Where a call runs.
enum class Exec {
  kInline,  // on the loop thread: quick, never blocks on I/O other than the local store
  kWorker,  // on a worker thread: may block
};

// Handed to a stream handler: sends the messages of the response, one at a time.
class StreamWriter {
 public:
  // False once the client went away or cancelled, or the server is stopping: stop then.
  // flush = false only queues the message: the next Flush (or a flushing Write) sends it with
  // the others, in one send.
  bool Write(const google::protobuf::MessageLite& message, bool flush = true);
  bool Flush();
  bool cancelled() const;

 private:
  friend class Server;
  StreamWriter(std::shared_ptr<ServerConn> conn, std::shared_ptr<StreamControl> control, uint64_t id)
      : conn_(std::move(conn)), control_(std::move(control)), id_(id) {}
  std::shared_ptr<ServerConn> conn_;
  std::shared_ptr<StreamControl> control_;
  uint64_t id_;
  std::string frame_;  // reused
};

// The methods a server answers. Fill it before Server::Start; read-only afterwards.
class Service {
 public:
  using Message = google::protobuf::MessageLite;

  // fn answers req in *resp. exec (may be null = kInline) picks where each call runs, from
  // its request.
  template <typename Req, typename Resp>
  void AddUnary(uint16_t method, std::string name, std::function<absl::Status(const Req&, Resp*)> fn,
                std::function<Exec(const Req&)> exec = nullptr) {
    Method m;
    m.name = std::move(name);
    m.new_request = [] { return std::make_unique<Req>(); };
    if (exec) {
      m.exec = [exec](const Message& r) { return exec(static_cast<const Req&>(r)); };
    }
    m.unary = [fn](const Message& r, std::string* out) -> absl::Status {
      Resp resp;
      absl::Status s = fn(static_cast<const Req&>(r), &resp);
      if (s.ok() && !resp.AppendToString(out)) return absl::InternalError("cannot serialize the reply");
      return s;
    };
    Add(method, std::move(m));
  }
  // A server stream: fn writes any number of messages and returns how the call ended. It runs
  // on a thread of its own.
  template <typename Req>
  void AddStream(uint16_t method, std::string name, std::function<absl::Status(const Req&, StreamWriter&)> fn) {
    Method m;
    m.name = std::move(name);
    m.new_request = [] { return std::make_unique<Req>(); };
    m.stream = [fn](const Message& r, StreamWriter& w) { return fn(static_cast<const Req&>(r), w); };
    Add(method, std::move(m));
  }

 private:
  friend class Server;
  struct Method {
    std::string name;
    std::function<std::unique_ptr<Message>()> new_request;
    std::function<Exec(const Message&)> exec;  // null = kInline
    std::function<absl::Status(const Message&, std::string*)> unary;
    std::function<absl::Status(const Message&, StreamWriter&)> stream;
    Histogram* latency = nullptr;
    Counter* errors = nullptr;
  };
  void Add(uint16_t method, Method m);
  const Method* Find(uint16_t method) const;

  std::unordered_map<uint16_t, Method> methods_;
};

class Server {
 public:
  struct Options {
    // Event loops; 0 = the number of cores.
    int loop_threads = 0;
    // Threads for kWorker calls, and calls queued for them before a call is refused
    // (UNAVAILABLE). Default: 32, 4096.
    int worker_threads = 32;
    size_t worker_queue = 4096;
    // Largest request payload, in bytes. Default: 256 MiB.
    size_t max_payload = kDefaultMaxPayload;
    // Replies buffered for a connection beyond which the server stops reading its requests
    // until the client reads. Default: 16 MiB.
    size_t max_pending_output = 16 << 20;
    // Names threads and labels metrics (kelp_rpc_*{server=...}; per method latency in
    // <metric_prefix>_seconds{method=...}).
    std::string name = "rpc";
    std::string metric_prefix = "kelp_rpc";
    // Server side of mutual TLS (security::NewServerSslCtx): peer certificate required and
    // verified. Default: null = plaintext.
    std::shared_ptr<SSL_CTX> tls;
  };

  // service must outlive the server.
  Server(Options options, Service* service);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  absl::Status Start();
  // Serves a connected socket whose HTTP upgrade request was read (not answered: the server
  // answers 101 itself). initial: bytes that arrived after the request head. Takes fd.
  // client: the Kelp-Client id the upgrade request named (ParseClientId), 0 for none.
  void Adopt(int fd, std::string initial, uint64_t client = 0);
  // Also accepts connections itself on ip:port (0 = any free port), each starting with the
  // HTTP upgrade. Returns the port. Call after Start.
  absl::StatusOr<int> Listen(const std::string& ip, int port);
  // Closes every connection (calls in flight end with UNAVAILABLE at their clients), ends
  // every stream and joins every thread. Idempotent.
  void Stop();

  int connections() const { return connections_.load(); }

 private:
  friend class ServerConn;
  friend class StreamWriter;
  struct Loop;

  // Each loop runs 1 + kLoopFollowers threads, leader/follower: the leader waits in
  // epoll_wait and handles what it returns; given a kWorker call while a follower waits, it
  // keeps the call, hands the lead to the follower and runs the call itself.
  static constexpr int kLoopFollowers = 2;
  void LoopThread(Loop* loop);
  // Leads until stopping, or until it keeps a call (loop->own) to run once it has let go.
  void Lead(Loop* loop);
  bool FollowerIdle(Loop* loop);
  void CloseConns(Loop* loop);
  void AddConn(Loop* loop, int fd, std::string initial, bool needs_head, uint64_t client);
  void OnReadable(Loop* loop, const std::shared_ptr<ServerConn>& conn);
  void OnWritable(Loop* loop, const std::shared_ptr<ServerConn>& conn);
  void CloseConn(Loop* loop, const std::shared_ptr<ServerConn>& conn);
  // Runs the frames complete in the connection's input; false when it must close.
  bool ProcessFrames(Loop* loop, const std::shared_ptr<ServerConn>& conn);
  bool ProcessUpgradeHead(const std::shared_ptr<ServerConn>& conn);
  // Sends the 101 and, with TLS, starts the handshake. False when the connection must close.
  bool SwitchProtocols(const std::shared_ptr<ServerConn>& conn);
  // Advances a TLS handshake; false when it failed.
  bool ContinueHandshake(const std::shared_ptr<ServerConn>& conn);
  // on_loop: the reply joins the others of the loop's current read; else it is sent now.
  void RunCall(const std::shared_ptr<ServerConn>& conn, const Service::Method& m, uint64_t id,
               const google::protobuf::MessageLite& req, bool on_loop);
  void StartStream(const std::shared_ptr<ServerConn>& conn, const Service::Method& m, uint64_t id,
                   std::shared_ptr<google::protobuf::MessageLite> req);
  void ReapStreams();

  Options opts_;
  Service* const service_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<uint64_t> next_loop_{0};
  std::vector<std::unique_ptr<Loop>> loops_;
  std::unique_ptr<ThreadPool> workers_;
  int listen_fd_ = -1;
  Gauge* conn_gauge_ = nullptr;
  Counter* bad_frames_ = nullptr;
  Counter* tls_refused_ = nullptr;

  struct StreamThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    std::shared_ptr<StreamControl> control;
  };
  // Held while a connection's out_mu_ and streams_mu_ are taken (StartStream refusing a
  // stream); nothing is taken before it.
  Mutex streams_mu_;
  std::list<StreamThread> streams_ ABSL_GUARDED_BY(streams_mu_);
};

}  // namespace kelp::rpc
