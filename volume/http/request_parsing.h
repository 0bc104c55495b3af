// Parsing of the pieces of a data-plane request: the file id in the path, the Range header,
// If-None-Match, and a multipart/form-data upload. Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "shared/file_id.h"

namespace kelp::volume {

// "/3,01637037d6", "/3,01637037d6.jpg", "/3/01637037d6", "/3/01637037d6.jpg" and
// "/3/01637037d6/any-name.jpg" all name volume 3, key 0x01, cookie 0x637037d6.
// InvalidArgument for anything else.
absl::StatusOr<FileId> ParseFidPath(std::string_view path);

struct ByteRange {
  uint64_t start = 0;
  uint64_t length = 0;
};
enum class RangeKind {
  kFull,           // no Range header, or a multi-range request served whole
  kPartial,        // one satisfiable range
  kUnsatisfiable,  // beyond the end, or not a byte range we can parse: 416
};
// Interprets a Range header ("bytes=a-b", "bytes=a-", "bytes=-n") against a body of size bytes.
RangeKind ParseRange(std::string_view header, uint64_t size, ByteRange* out);

// Whether an If-None-Match header ("*", "\"etag\"", "W/\"etag\"", lists) matches etag
// (given without quotes).
bool EtagMatches(std::string_view if_none_match, std::string_view etag);

struct MultipartFile {
  std::string_view filename;
  std::string_view data;
};
// The file part of a multipart/form-data body (the first part with a filename, else the
// first part), as `curl -F file=@x` sends it. Views point into body.
absl::StatusOr<MultipartFile> ParseMultipartFile(std::string_view content_type,
                                                 std::string_view body);

bool IsMultipart(std::string_view content_type);

}  // namespace kelp::volume
