// Parsing of the pieces of a data-plane request: the file id in the path and a
// multipart/form-data upload (Range and If-None-Match: shared/http/range.h). Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "shared/file_id.h"
#include "shared/http/range.h"

namespace kelp::volume {

// "/3,01637037d6", "/3,01637037d6.jpg", "/3/01637037d6", "/3/01637037d6.jpg" and
// "/3/01637037d6/any-name.jpg" all name volume 3, key 0x01, cookie 0x637037d6.
// InvalidArgument for anything else.
absl::StatusOr<FileId> ParseFidPath(std::string_view path);

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
