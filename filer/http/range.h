// Byte ranges of a read: the HTTP Range header (RFC 9110 section 14) and its answer.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kelp::filer {

struct RangeRequest {
  enum class Kind {
    kWhole,          // no Range header, or one we may ignore (several ranges): send it all
    kPartial,        // send [offset, offset + length) with 206
    kUnsatisfiable,  // 416: starts at or past the end
    kMalformed,      // 416 too, as Go's http.ServeContent (and so SeaweedFS) answers
  };
  Kind kind = Kind::kWhole;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// header is the Range header's value ("" when absent); size is the file size.
// "bytes=a-b" (b clamped to the end), "bytes=a-", "bytes=-n" (the last n bytes).
RangeRequest ParseRange(std::string_view header, uint64_t size);

// "bytes a-b/size" for a partial answer.
std::string ContentRange(uint64_t offset, uint64_t length, uint64_t size);

}  // namespace kelp::filer
