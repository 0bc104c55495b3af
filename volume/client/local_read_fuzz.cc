// libFuzzer target: a volume server's answer to a local-read request (volume/client/
// local_reader.h), as the client receives it: an HTTP response head whose headers
// ParseNeedleLocation reads. Properties: a location it accepts names an absolute .dat path, an
// aligned offset and a size a needle can have; nothing crashes.
#include <cstdint>
#include <string_view>

#include "absl/strings/match.h"
#include "shared/http/http_parser.h"
#include "shared/testing/fuzz_util.h"
#include "volume/client/local_reader.h"
#include "volume/store/needle_format.h"

using namespace kelp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  http::ResponseHead head;
  http::ParseResult r = http::ParseResponseHead(in, "GET", &head);
  if (r.kind != http::ParseResult::kOk) return 0;
  auto loc = volume::ParseNeedleLocation(head.headers);
  if (loc.ok()) {
    FUZZ_CHECK(!loc->dat_path.empty() && loc->dat_path.front() == '/');
    FUZZ_CHECK(absl::EndsWith(loc->dat_path, ".dat"));
    FUZZ_CHECK(loc->offset % volume::format::kAlignment == 0);
    FUZZ_CHECK(loc->size <= volume::format::kMaxDataSize);
  }
  return 0;
}
