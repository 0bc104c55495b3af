// libFuzzer target: the Range and If-None-Match headers (shared/http/range.h). Properties: a
// partial range always lies inside the file and is not empty; nothing crashes.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "shared/http/range.h"
#include "shared/testing/fuzz_util.h"

using namespace kelp::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t file_size = 0;
  if (size >= 8) {
    std::memcpy(&file_size, data, 8);
    data += 8;
    size -= 8;
    if (file_size & 1) file_size %= 100000;  // small files half the time, where edges are
  }
  std::string_view header(reinterpret_cast<const char*>(data), size);
  RangeRequest r = ParseRange(header, file_size);
  if (r.kind == RangeRequest::Kind::kPartial) {
    FUZZ_CHECK(r.length > 0);
    FUZZ_CHECK(r.offset < file_size);
    FUZZ_CHECK(r.length <= file_size - r.offset);
    (void)ContentRange(r.offset, r.length, file_size);
  }
  size_t half = size / 2;
  (void)EtagMatches(header.substr(0, half), header.substr(half));
  (void)TrimOws(header);
  return 0;
}
