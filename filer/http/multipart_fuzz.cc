// libFuzzer target: the two multipart/form-data decoders, the volume server's (whole body in
// memory) and the filer's (streaming), and the volume server's fid paths. The first bytes
// pick the boundary and the read size. Properties: no crash; the streaming decoder yields the
// same file content whatever size its reads are.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>

#include "filer/http/body.h"
#include "shared/testing/fuzz_util.h"
#include "volume/http/request_parsing.h"

namespace {

// The file part through MultipartFileBody read n bytes at a time; nullopt if malformed.
std::optional<std::string> Stream(const std::string& body, const std::string& boundary, size_t n) {
  kelp::filer::StringBody in(body);
  kelp::filer::MultipartFileBody part(&in, boundary);
  if (!part.Open().ok()) return std::nullopt;
  std::string out, buf(n, '\0');
  for (;;) {
    auto got = part.Read(buf.data(), n);
    if (!got.ok()) return std::nullopt;
    if (*got == 0) return out;
    out.append(buf.data(), *got);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string boundary = in.ConsumeRandomLengthString(80);
  size_t step = in.ConsumeIntegralInRange<size_t>(1, 300);
  std::string body = in.ConsumeRemainingBytesAsString();
  std::string ctype = "multipart/form-data; boundary=" + boundary;

  (void)kelp::volume::ParseFidPath(body);
  (void)kelp::volume::ParseMultipartFile(ctype, body);
  std::string b = kelp::filer::MultipartBoundary(ctype);
  if (b.empty()) return 0;
  auto whole = Stream(body, b, 1 << 16);
  auto pieces = Stream(body, b, step);
  FUZZ_CHECK(whole.has_value() == pieces.has_value());
  if (whole) FUZZ_CHECK(*whole == *pieces);
  return 0;
}
