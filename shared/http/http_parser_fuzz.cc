// libFuzzer target: the HTTP/1.1 request and response head parsers and the chunked body
// decoder, as the server and the client meet them. Properties: no crash or sanitizer report;
// a parsed head never claims more bytes than it was given; the chunked decoder gives the same
// payload whether it is fed at once or in pieces of any size.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "shared/http/http_parser.h"
#include "shared/testing/fuzz_util.h"

using namespace kelp::http;

namespace {

// Decodes in at once, or in pieces whose sizes cycle through `steps`. Returns false on
// malformed input; *out gets the payload, *consumed the bytes used.
bool DecodeChunked(std::string_view in, std::string_view steps, std::string* out, size_t* consumed) {
  ChunkedDecoder d;
  size_t pos = 0, step = 0;
  std::string pending;  // bytes fed but not consumed yet, as Conn keeps them
  while (pos < in.size() || !pending.empty()) {
    size_t n = steps.empty() ? in.size() : 1 + static_cast<uint8_t>(steps[step++ % steps.size()]) % 64;
    n = std::min(n, in.size() - pos);
    pending.append(in.substr(pos, n));
    pos += n;
    int64_t used = d.Decode(pending, out, 1 << 20);
    if (used < 0) return false;
    pending.erase(0, static_cast<size_t>(used));
    *consumed += static_cast<size_t>(used);
    if (d.done()) break;
    if (n == 0 && used == 0) break;  // input exhausted, decoder wants more
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  RequestHead req;
  ParseResult r = ParseRequestHead(in, &req);
  if (r.kind == ParseResult::kOk) {
    FUZZ_CHECK(r.consumed <= in.size());
    FUZZ_CHECK(!req.target.empty() && req.target[0] == '/');
    FUZZ_CHECK(req.framing.content_length >= 0);
    (void)QueryParam(req.query, "path");
    if (req.framing.chunked) {
      std::string_view body = in.substr(r.consumed);
      std::string whole, pieces;
      size_t used_whole = 0, used_pieces = 0;
      bool ok_whole = DecodeChunked(body, {}, &whole, &used_whole);
      bool ok_pieces = DecodeChunked(body, req.target, &pieces, &used_pieces);
      FUZZ_CHECK(ok_whole == ok_pieces);
      if (ok_whole) {
        FUZZ_CHECK(whole == pieces);
        FUZZ_CHECK(used_whole == used_pieces);
      }
    }
  } else if (r.kind == ParseResult::kError) {
    FUZZ_CHECK(r.status >= 400 && r.status < 600);
  }
  ResponseHead resp;
  ParseResult rr = ParseResponseHead(in, size % 2 ? "HEAD" : "GET", &resp);
  if (rr.kind == ParseResult::kOk) FUZZ_CHECK(rr.consumed <= in.size());
  if (auto d = PercentDecode(in, size % 3 == 0)) FUZZ_CHECK(d->size() <= in.size());
  return 0;
}
