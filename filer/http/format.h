// Small encoders the HTTP dialects share: JSON strings (shared/json.h), Go's os.FileMode bits (both
// SeaweedFS and AGFS are written in Go and expose modes that way), RFC 3339 and HTTP dates,
// and a Content-Type guessed from a file name. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shared/json.h"  // JsonString, AppendJsonString

namespace kelp::filer {

// POSIX st_mode (S_IFMT type bits + permissions) as Go's os.FileMode: permissions in the
// low 9 bits, the type and setuid/setgid/sticky as Go's high bits (a directory 0755 is
// 2147484141).
uint32_t GoFileMode(uint32_t posix_mode);

// "2024-05-06T07:08:09.123456789Z" (Go's time.RFC3339Nano in UTC: trailing zeros of the
// fraction dropped).
std::string Rfc3339Nano(int64_t unix_ns);
// "Mon, 06 May 2024 07:08:09 GMT" (Last-Modified).
std::string HttpDate(int64_t unix_ns);
// Seconds of an HTTP date, -1 if it does not parse (If-Modified-Since).
int64_t ParseHttpDate(std::string_view s);

// "text/html; charset=utf-8" for "x.html"...; "" when the extension is not known.
std::string_view MimeByExtension(std::string_view name);

}  // namespace kelp::filer
