// libFuzzer target: the metadata transport's decoders (shared/rpc/frame.h): frames, ERROR
// payloads, and the HTTP upgrade heads both ends read before frames start. The first byte
// picks what the rest is. Properties besides "no crash, no leak, no UB":
//  0 a stream of frames: each decoded frame lies inside the input, re-encodes to the same
//    header bytes, and every shorter prefix of it is "incomplete", never an error;
//  1 an ERROR payload: what decodes encodes and decodes to the same code, errno and message;
//  2, 3 an upgrade request / a 101 answer: a head's size lies inside the input, and the head
//    alone parses to the same size.
#include <cstdint>
#include <string>
#include <string_view>

#include "shared/rpc/frame.h"
#include "shared/status.h"
#include "shared/testing/fuzz_util.h"

namespace {

using namespace kelp::rpc;

void Frames(std::string_view in) {
  // A small limit so that lengths above it are reached; the second byte scales it.
  size_t max_payload = in.empty() ? 0 : static_cast<uint8_t>(in[0]) * 64;
  if (!in.empty()) in.remove_prefix(1);
  while (!in.empty()) {
    FrameHeader h;
    absl::StatusOr<size_t> size = DecodeFrame(in, max_payload, &h);
    if (!size.ok() || *size == 0) return;
    FUZZ_CHECK(*size == kFrameHeaderSize + h.payload_size);
    FUZZ_CHECK(*size <= in.size());
    FUZZ_CHECK(h.payload_size <= max_payload);
    char again[kFrameHeaderSize];
    EncodeFrameHeader(again, h.type, h.method, h.id, h.payload_size);
    FUZZ_CHECK(std::string_view(again, kFrameHeaderSize) == in.substr(0, kFrameHeaderSize));
    for (size_t k : {size_t{0}, size_t{3}, size_t{4}, kFrameHeaderSize - 1, kFrameHeaderSize, *size - 1}) {
      if (k >= *size) continue;
      FrameHeader p;
      absl::StatusOr<size_t> partial = DecodeFrame(in.substr(0, k), max_payload, &p);
      FUZZ_CHECK(partial.ok() && *partial == 0);
    }
    in.remove_prefix(*size);
  }
}

void StatusPayload(std::string_view in) {
  absl::Status s = DecodeStatus(in);
  FUZZ_CHECK(!s.ok());  // an ERROR frame never means success
  absl::Status again = DecodeStatus(EncodeStatus(s));
  FUZZ_CHECK(again.code() == s.code());
  FUZZ_CHECK(again.message() == s.message());
  FUZZ_CHECK(kelp::ErrnoOf(again) == kelp::ErrnoOf(s));
}

template <typename Parse>
void Head(std::string_view in, Parse parse) {
  absl::StatusOr<size_t> size = parse(in);
  if (!size.ok() || *size == 0) return;
  FUZZ_CHECK(*size <= in.size());
  absl::StatusOr<size_t> alone = parse(in.substr(0, *size));
  FUZZ_CHECK(alone.ok() && *alone == *size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      Frames(in);
      break;
    case 1:
      StatusPayload(in);
      break;
    case 2:
      Head(in, [](std::string_view d) { return ParseUpgradeRequest(d); });
      break;
    default:
      Head(in, ParseUpgradeResponse);
      break;
  }
  return 0;
}
