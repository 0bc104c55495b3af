// Where the bytes of an HTTP write come from: the raw request body, or the one file part of
// a multipart/form-data body (what `curl -F file=@x` sends), read as a stream so a body of
// any size passes through in bounded memory. Not thread-safe: one request, one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "shared/http/http_server.h"

namespace kelp::filer {

class BodySource {
 public:
  virtual ~BodySource() = default;
  // Reads up to n bytes; 0 at the end of the content.
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
};

// Appends up to n bytes from body to *out; fewer only at the end of the content.
absl::Status ReadUpTo(BodySource& body, size_t n, std::string* out);

class RequestBody : public BodySource {
 public:
  explicit RequestBody(http::Request& req) : req_(req) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override { return req_.Read(buf, n); }

 private:
  http::Request& req_;
};

class StringBody : public BodySource {
 public:
  explicit StringBody(std::string data) : data_(std::move(data)) {}
  absl::StatusOr<size_t> Read(char* buf, size_t n) override;

 private:
  std::string data_;
  size_t pos_ = 0;
};

// The boundary of a "multipart/form-data; boundary=..." content type; "" if it is not one.
std::string MultipartBoundary(std::string_view content_type);

// The content of the first part that carries a filename (or is named "file") of a
// multipart/form-data body read from `in`. Open() reads up to that part's content; parts
// before it are skipped. Malformed bodies fail with EINVAL (HTTP 400).
class MultipartFileBody : public BodySource {
 public:
  MultipartFileBody(BodySource* in, std::string boundary);
  absl::Status Open();
  absl::StatusOr<size_t> Read(char* buf, size_t n) override;
  // The part's filename ("" when it has none) and Content-Type ("" when absent).
  const std::string& filename() const { return filename_; }
  const std::string& content_type() const { return content_type_; }

 private:
  // Reads more of `in` into buf_; false at its end.
  absl::StatusOr<bool> Fill();
  // Skips to just past the next delimiter line; false if the closing delimiter came first.
  absl::StatusOr<bool> NextPart();
  absl::StatusOr<bool> ParsePartHeaders();  // true if this part is the file

  BodySource* in_;
  const std::string dash_boundary_;  // "--" boundary
  const std::string delimiter_;      // CRLF "--" boundary
  std::string buf_;
  size_t pos_ = 0;
  bool first_ = true;  // nothing consumed yet: the body may start with the delimiter
  bool in_done_ = false;
  bool part_done_ = false;
  std::string filename_;
  std::string content_type_;
};

}  // namespace kelp::filer
