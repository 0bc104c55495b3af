// The client side of shared/rpc: one TCP connection to a server, upgraded from HTTP on the
// server's HTTP port (docs/rpc-protocol.md), carrying every call of every thread at once.
//
// No thread of its own: a thread waiting for its reply reads the socket for everyone
// (leader/follower). When one thread waits, it sleeps in recv() and the reply wakes it
// directly: one thread switch per call, not two. When several wait, one reads and hands each
// reply to its caller; the reader passes the socket on when its own reply came.
//
// A connection that fails (the server went away, a malformed frame, a send error) fails every
// call in flight with UNAVAILABLE; the next call connects again. Calls are not retried here:
// whether a call may be sent twice is the caller's to say.
//
// With Options::tls the connection runs a TLS handshake right after the 101 (mutual TLS:
// docs/security.md) and frames travel inside it; without it, plain TCP with no TLS code on its
// path.
//
// Thread-safe: share one Channel. A ClientStream is read by one thread; Cancel() from any.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <google/protobuf/message_lite.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/rpc/frame.h"

namespace kelp::rpc {

class ClientConn;
struct PendingCall;

// The bytes of a serialized request message.
struct SerializedRequest {
  std::string bytes;
};

// A streamed response. Next() blocks for the next message.
class ClientStream {
 public:
  ~ClientStream();  // cancels the call if it is still running
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // The next message into *message; false when the stream ended (then Finish() says how).
  bool Next(google::protobuf::MessageLite* message);
  // How the stream ended: OK for a clean end, CANCELLED after Cancel(), UNAVAILABLE when the
  // connection failed. Call once Next returned false.
  absl::Status Finish();
  // Ends the stream from any thread; a blocked Next returns false.
  void Cancel();
  // Whether a thread is blocked in Next() now, waiting for a message (tests use it to cancel
  // a reader that is surely waiting).
  bool blocked();

 private:
  friend class Channel;
  ClientStream(std::shared_ptr<ClientConn> conn, std::shared_ptr<PendingCall> call, uint64_t id);
  std::shared_ptr<ClientConn> conn_;
  std::shared_ptr<PendingCall> call_;
  uint64_t id_;
  absl::Status end_;
};

class Channel {
 public:
  struct Options {
    // Time allowed to connect and upgrade, within a call's own timeout. Default: 3000 ms.
    int connect_timeout_ms = 3000;
    // Largest reply payload accepted, in bytes. Default: 256 MiB.
    size_t max_payload = kDefaultMaxPayload;
    // Extra header lines ("Name: value\r\n"...) of each upgrade request, e.g. the token a
    // secured filer asks for (docs/security.md). Empty = none.
    std::function<std::string()> upgrade_headers;
    // Client side of mutual TLS (security::NewClientSslCtx, security::ClientSslCtx): this
    // process's certificate, the CA to trust; the server's certificate must name the host of
    // the address. Default: null = plaintext.
    std::shared_ptr<SSL_CTX> tls;
    // A caller alone on the connection polls the socket for its reply before it sleeps in
    // recv(): for three times as long as its method's replies lately took, at most this long,
    // and not at all for a method whose replies took more than twice this (the channel keeps
    // each method's recent reply time). On a VM whose idle CPUs halt, a reply that wakes a
    // sleeping caller waits for the hypervisor to wake that CPU too (docs/rpc-protocol.md,
    // "Reply polling"). Plaintext only. Default: 0 = never poll.
    std::chrono::microseconds reply_poll{0};
  };

  // address: "host:port" of the server's HTTP port. Connects on first use.
  Channel(std::string address, Options options);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects now if not connected.
  absl::Status Connect(std::chrono::milliseconds timeout);

  // One call. resp is filled on OK. DEADLINE_EXCEEDED when no reply came within timeout
  // (the call may still have run on the server), UNAVAILABLE when the connection failed.
  absl::Status Call(uint16_t method, const google::protobuf::MessageLite& req, google::protobuf::MessageLite* resp,
                    std::chrono::milliseconds timeout);
  // The same with a request already in protobuf's wire format (a repeated field put together
  // from messages serialized one by one is not copied into a message first).
  absl::Status Call(uint16_t method, const SerializedRequest& req, google::protobuf::MessageLite* resp,
                    std::chrono::milliseconds timeout);
  // The same with a serialized request and the raw reply payload.
  absl::StatusOr<std::string> CallRaw(uint16_t method, std::string_view request, std::chrono::milliseconds timeout);

  // Starts a streamed call on a connection of its own; its messages arrive through the
  // returned stream.
  absl::StatusOr<std::unique_ptr<ClientStream>> OpenStream(uint16_t method, const google::protobuf::MessageLite& req,
                                                           std::chrono::milliseconds connect_timeout);

  // Drops the connection if the server has closed its end (seen without blocking: one
  // poll(2)), so that the next call connects afresh rather than being sent into a connection
  // that can only fail. Calls in flight on it fail with UNAVAILABLE, as they would anyway.
  // With unless_heard_within, a connection that brought a reply that recently is taken as
  // alive without the poll (a server that died since fails the call in flight instead).
  void DropIfClosed(std::chrono::milliseconds unless_heard_within = std::chrono::milliseconds(0));

  const std::string& address() const { return address_; }
  // Connections made so far (1 while the first one lives).
  uint64_t connects() const;
  // Calls whose caller polled for the reply (Options::reply_poll), and of those the ones whose
  // reply came while it polled.
  uint64_t reply_polls() const { return reply_polls_.load(std::memory_order_relaxed); }
  uint64_t replies_polled() const { return replies_polled_.load(std::memory_order_relaxed); }

 private:
  absl::StatusOr<std::shared_ptr<ClientConn>> Conn(std::chrono::steady_clock::time_point deadline);
  // Dials, upgrades and (with TLS) shakes hands: a connection of its own.
  absl::StatusOr<std::shared_ptr<ClientConn>> NewConn(std::chrono::steady_clock::time_point deadline);

  const std::string address_;
  const Options opts_;
  // Lock order: connect_mu_, then mu_, then the connection's own mu_ (conn_->broken() and
  // ~Channel's conn_->Fail run under mu_).
  Mutex connect_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one connect at a time
  mutable Mutex mu_;
  std::shared_ptr<ClientConn> conn_ ABSL_GUARDED_BY(mu_);
  uint64_t connects_ ABSL_GUARDED_BY(mu_) = 0;
  // Recent reply time of each method below kPolledMethods, in microseconds (a moving average;
  // 0 = none yet), for Options::reply_poll.
  static constexpr size_t kPolledMethods = 256;
  std::unique_ptr<std::atomic<uint32_t>[]> reply_us_;
  std::atomic<uint64_t> reply_polls_{0};
  std::atomic<uint64_t> replies_polled_{0};
  Counter* polls_caught_metric_ = nullptr;
  Counter* polls_missed_metric_ = nullptr;
};

}  // namespace kelp::rpc
