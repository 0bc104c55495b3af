// Conditional and partial GETs (RFC 9110 sections 13 and 14): the Range header, its
// Content-Range answer and If-None-Match, for every server that serves bytes (volume
// servers' blobs, the filer's files). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kelp::http {

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

// Whether an If-None-Match header ("*", "\"tag\"", "W/\"tag\"", lists of them) names etag,
// which may be given with or without its quotes.
bool EtagMatches(std::string_view if_none_match, std::string_view etag);

// s without leading and trailing spaces and tabs (optional whitespace of a header value).
std::string_view TrimOws(std::string_view s);

}  // namespace kelp::http
