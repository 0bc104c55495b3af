// HTTP/1.1 message parsing (RFC 9112), shared by the server and the client. Strict where
// laxness enables request smuggling (conflicting Content-Length, Content-Length together with
// Transfer-Encoding), tolerant of bare LF line endings. Pure functions and a small state
// machine; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kelp::http {

// Header fields in arrival order; lookups are case-insensitive.
class Headers {
 public:
  std::string_view Get(std::string_view name) const;  // "" when absent
  bool Has(std::string_view name) const;
  void Add(std::string_view name, std::string_view value);
  void Set(std::string_view name, std::string_view value);  // replaces every field of that name
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }
  void Clear() { items_.clear(); }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// How a message body is delimited.
struct BodyFraming {
  int64_t content_length = 0;  // valid when !chunked && !until_close
  bool chunked = false;
  bool until_close = false;    // responses only: read until EOF
};

struct RequestHead {
  std::string method;
  std::string target;  // as sent: "/path?query"
  std::string path;    // percent-decoded path without the query
  std::string query;   // raw query string, without '?'
  int version_minor = 1;
  Headers headers;
  BodyFraming framing;
  bool keep_alive = true;
  bool expect_continue = false;
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  int version_minor = 1;
  Headers headers;
  BodyFraming framing;
  bool keep_alive = true;
};

// Result of parsing a head from the front of a buffer.
struct ParseResult {
  enum Kind { kIncomplete, kOk, kError } kind = kIncomplete;
  size_t consumed = 0;  // bytes of the head, including the blank line (kOk)
  int status = 400;     // HTTP status to answer with (kError)
  std::string error;
};

ParseResult ParseRequestHead(std::string_view buf, RequestHead* out);
// request_method tells whether the response to a HEAD request has no body.
ParseResult ParseResponseHead(std::string_view buf, std::string_view request_method, ResponseHead* out);

// Decodes %XX escapes; returns nullopt on a malformed escape. plus_as_space for query strings.
std::optional<std::string> PercentDecode(std::string_view s, bool plus_as_space);
std::string PercentEncodePath(std::string_view s);  // keeps '/' and unreserved characters
std::string PercentEncodeQuery(std::string_view s);

// The decoded value of key in a raw query string ("a=1&b=x%20y"); nullopt when absent.
std::optional<std::string> QueryParam(std::string_view raw_query, std::string_view key);

// Incremental decoder for chunked transfer coding. Feed it bytes; it emits payload bytes.
class ChunkedDecoder {
 public:
  // Consumes a prefix of in; appends payload to *out (at most max_out bytes). Returns the
  // number of bytes consumed, or -1 on malformed input.
  int64_t Decode(std::string_view in, std::string* out, size_t max_out);
  bool done() const { return state_ == kDone; }

 private:
  enum State { kSize, kSizeExt, kSizeLf, kData, kDataCr, kDataLf, kTrailer, kTrailerLf, kDone };
  State state_ = kSize;
  uint64_t remaining_ = 0;
  int size_digits_ = 0;
  bool trailer_line_empty_ = true;
};

const char* StatusText(int status);

}  // namespace kelp::http
