#include "shared/rpc/frame.h"

#include <cstring>

#include "absl/status/statusor.h"
#include "shared/http/http_parser.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::rpc {
namespace {

void PutU16(char* p, uint16_t v) {
  p[0] = static_cast<char>(v);
  p[1] = static_cast<char>(v >> 8);
}
void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint16_t GetU16(const char* p) {
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | static_cast<uint8_t>(p[1]) << 8);
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

void EncodeFrameHeader(char* h, FrameType type, uint16_t method, uint64_t id, size_t payload_size) {
  PutU32(h, static_cast<uint32_t>(kFrameHeaderSize - kLengthFieldSize + payload_size));
  h[4] = static_cast<char>(type);
  h[5] = 0;
  PutU16(h + 6, method);
  PutU64(h + 8, id);
}

void AppendFrameHeader(std::string* out, FrameType type, uint16_t method, uint64_t id, size_t payload_size) {
  char h[kFrameHeaderSize];
  EncodeFrameHeader(h, type, method, id, payload_size);
  out->append(h, sizeof h);
}

absl::StatusOr<size_t> DecodeFrame(std::string_view data, size_t max_payload, FrameHeader* header) {
  if (data.size() < kLengthFieldSize) return 0;
  uint32_t length = GetU32(data.data());
  if (length < kFrameHeaderSize - kLengthFieldSize) {
    return absl::InvalidArgumentError(kelp::StrCat("rpc frame length ", length, " is below the header size"));
  }
  uint64_t payload = length - (kFrameHeaderSize - kLengthFieldSize);
  if (payload > max_payload) {
    return absl::InvalidArgumentError(
        kelp::StrCat("rpc frame of ", payload, " payload bytes exceeds the limit of ", max_payload));
  }
  if (data.size() < kFrameHeaderSize) return 0;
  uint8_t type = static_cast<uint8_t>(data[4]);
  if (type < static_cast<uint8_t>(FrameType::kRequest) || type > static_cast<uint8_t>(FrameType::kCancel)) {
    return absl::InvalidArgumentError(kelp::StrCat("unknown rpc frame type ", type));
  }
  if (data[5] != 0) return absl::InvalidArgumentError("rpc frame flags must be 0");
  size_t total = kFrameHeaderSize + payload;
  if (data.size() < total) return 0;
  header->type = static_cast<FrameType>(type);
  header->flags = 0;
  header->method = GetU16(data.data() + 6);
  header->id = GetU64(data.data() + 8);
  header->payload_size = static_cast<uint32_t>(payload);
  return total;
}

absl::StatusOr<size_t> ParseUpgradeRequest(std::string_view data) {
  http::RequestHead head;
  http::ParseResult r = http::ParseRequestHead(data, &head);
  if (r.kind == http::ParseResult::kIncomplete) {
    if (data.size() <= kMaxUpgradeHead) return 0;
    return absl::InvalidArgumentError("upgrade request head too long");
  }
  if (r.kind == http::ParseResult::kError) return absl::InvalidArgumentError(r.error);
  if (!http::EqualsIgnoreCase(head.headers.Get("Upgrade"), kUpgradeProtocol)) {
    return absl::InvalidArgumentError(kelp::StrCat("expected an upgrade to ", kUpgradeProtocol));
  }
  return r.consumed;
}

absl::StatusOr<size_t> ParseUpgradeResponse(std::string_view data) {
  http::ResponseHead head;
  http::ParseResult r = http::ParseResponseHead(data, "GET", &head);
  if (r.kind == http::ParseResult::kOk) {
    if (head.status != 101) {
      return absl::FailedPreconditionError(kelp::StrCat(
          "the server answered HTTP ", head.status, " to the rpc upgrade (not a kelp server of this version?)"));
    }
    return r.consumed;
  }
  if (r.kind == http::ParseResult::kError || data.size() > kMaxUpgradeHead) {
    return absl::InvalidArgumentError("malformed answer to the rpc upgrade");
  }
  return 0;
}

std::string EncodeStatus(const absl::Status& status) {
  std::string out(8, '\0');
  PutU32(out.data(), static_cast<uint32_t>(status.code()));
  PutU32(out.data() + 4, static_cast<uint32_t>(CarriedErrno(status)));
  out.append(status.message().data(), status.message().size());
  return out;
}

absl::Status DecodeStatus(std::string_view payload) {
  if (payload.size() < 8) return absl::InternalError("malformed rpc error frame");
  uint32_t code = GetU32(payload.data());
  int err = static_cast<int>(GetU32(payload.data() + 4));
  std::string_view message = payload.substr(8);
  if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(kelp::StrCat("rpc error frame with code ", code, ": ", message));
  }
  return StatusWithErrno(static_cast<absl::StatusCode>(code), err, message);
}

}  // namespace kelp::rpc
