// What an HTTP handler sees of one exchange: the Request (head, and a body read through
// Read/ReadAll, once) and the ResponseWriter that answers it; and the Handler interface an
// HttpServer (http_server.h) dispatches to. The same API whether the request runs inline on
// an event loop (body fully buffered) or on a worker thread (body streamed from the socket).
//
// A body that cannot be read because of the client (it closed the connection or reset it
// mid-body, sent a malformed chunked coding, or sent too slowly) fails Read with a status
// whose HTTP answer is a 4xx (400 or 408), so handlers that pass errors to SendStatus answer
// and count it as the client's fault, not the server's.
//
// Threads: a Request and its ResponseWriter belong to the one thread running the handler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/http/http_parser.h"

namespace kelp::http {

class Conn;

class Request {
 public:
  const std::string& method() const { return head_.method; }
  const std::string& target() const { return head_.target; }
  const std::string& path() const { return head_.path; }  // percent-decoded
  const std::string& raw_query() const { return head_.query; }
  const Headers& headers() const { return head_.headers; }
  std::string_view header(std::string_view name) const { return head_.headers.Get(name); }
  std::optional<std::string> query(std::string_view key) const { return QueryParam(head_.query, key); }
  // Content-Length, or -1 for a chunked body.
  int64_t content_length() const { return head_.framing.chunked ? -1 : head_.framing.content_length; }
  const std::string& peer() const { return peer_; }

  // Reads up to n body bytes; 0 at the end of the body.
  absl::StatusOr<size_t> Read(char* buf, size_t n);
  // Reads the whole body; EFBIG (HTTP 413) if it exceeds limit bytes.
  absl::StatusOr<std::string> ReadAll(size_t limit);
  // Reads until buf holds n bytes or the body ends; returns the bytes read.
  absl::StatusOr<size_t> ReadFull(char* buf, size_t n);
  bool body_done() const { return body_done_; }

 private:
  friend class Conn;
  friend class HttpServer;
  friend class ResponseWriter;
  // Sets up the body state for a freshly parsed head.
  void Begin(Conn* conn);

  RequestHead head_;
  std::string peer_;
  Conn* conn_ = nullptr;
  uint64_t body_left_ = 0;  // for Content-Length bodies
  ChunkedDecoder chunked_;
  bool body_done_ = false;
};

// Writes one response. Either Send(...) once, or WriteHead then Write* (then optionally Finish).
// For HEAD requests the body is dropped automatically; Content-Length stays as given.
class ResponseWriter {
 public:
  void Send(int status, std::string_view body, std::string_view content_type = "text/plain; charset=utf-8",
            const Headers& extra = {});
  void SendJson(int status, std::string_view json, const Headers& extra = {});
  // {"error": message} with the given status.
  void SendError(int status, std::string_view message);
  // The edge conversion: status -> HTTP code + {"error": ...}.
  void SendStatus(const absl::Status& status);

  // content_length < 0 selects chunked transfer coding.
  absl::Status WriteHead(int status, const Headers& headers, int64_t content_length);
  absl::Status Write(std::string_view data);
  absl::Status Finish();

  bool head_written() const { return head_written_; }
  int status() const { return status_; }
  // Close the connection after this response.
  void CloseAfter() { close_after_ = true; }

 private:
  friend class Conn;
  friend class HttpServer;
  ResponseWriter(Conn* conn, bool head_request) : conn_(conn), head_request_(head_request) {}

  Conn* conn_ = nullptr;
  bool head_request_ = false;
  bool head_written_ = false;
  bool finished_ = false;
  bool chunked_ = false;
  bool close_after_ = false;
  int status_ = 0;
  int64_t body_left_ = 0;
  uint64_t body_bytes_ = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Called on a loop thread with the head only (no body yet). True means Handle may run on the
  // loop: it must be quick, not block on anything slow, and the body is at most
  // HttpServer::Options::inline_body_limit bytes.
  virtual bool RunInline(const Request& head) const { return false; }
  virtual void Handle(Request& req, ResponseWriter& w) = 0;
};

// {"error": message} as the body of an error response (message JSON-escaped).
std::string ErrorJson(std::string_view message);

}  // namespace kelp::http
