#include "shared/rpc/frame.h"

#include <cstring>

#include <fmt/format.h>

#include "absl/status/statusor.h"
#include "shared/coding.h"
#include "shared/http/http_parser.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::rpc {

void EncodeFrameHeader(char* h, FrameType type, uint16_t method, uint64_t id, size_t payload_size) {
  EncodeFixed32LE(h, static_cast<uint32_t>(kFrameHeaderSize - kLengthFieldSize + payload_size));
  h[4] = static_cast<char>(type);
  h[5] = 0;
  EncodeFixed16LE(h + 6, method);
  EncodeFixed64LE(h + 8, id);
}

void AppendFrameHeader(std::string* out, FrameType type, uint16_t method, uint64_t id, size_t payload_size) {
  char h[kFrameHeaderSize];
  EncodeFrameHeader(h, type, method, id, payload_size);
  out->append(h, sizeof h);
}

absl::StatusOr<size_t> DecodeFrame(std::string_view data, size_t max_payload, FrameHeader* header) {
  if (data.size() < kLengthFieldSize) return 0;
  uint32_t length = DecodeFixed32LE(data.data());
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
  header->method = DecodeFixed16LE(data.data() + 6);
  header->id = DecodeFixed64LE(data.data() + 8);
  header->payload_size = static_cast<uint32_t>(payload);
  return total;
}

absl::StatusOr<uint64_t> ParseClientId(std::string_view value) {
  if (value.empty()) return 0;
  uint64_t id = 0;
  if (value.size() > 16 || !kelp::ParseInt(value, &id, 16)) {
    return absl::InvalidArgumentError("Kelp-Client: not 1-16 hex digits");
  }
  if (id == 0) return absl::InvalidArgumentError("Kelp-Client: 0 names no client");
  return id;
}

std::string ClientIdHeader(uint64_t id) {
  return fmt::format("{}: {:016x}\r\n", kClientHeader, id);
}

absl::StatusOr<size_t> ParseUpgradeRequest(std::string_view data, uint64_t* client) {
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
  absl::StatusOr<uint64_t> id = ParseClientId(head.headers.Get(kClientHeader));
  if (!id.ok()) return id.status();
  if (client != nullptr) *client = *id;
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
  EncodeFixed32LE(out.data(), static_cast<uint32_t>(status.code()));
  EncodeFixed32LE(out.data() + 4, static_cast<uint32_t>(CarriedErrno(status)));
  out.append(status.message().data(), status.message().size());
  return out;
}

absl::Status DecodeStatus(std::string_view payload) {
  if (payload.size() < 8) return absl::InternalError("malformed rpc error frame");
  uint32_t code = DecodeFixed32LE(payload.data());
  int err = static_cast<int>(DecodeFixed32LE(payload.data() + 4));
  std::string_view message = payload.substr(8);
  if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(kelp::StrCat("rpc error frame with code ", code, ": ", message));
  }
  return StatusWithErrno(static_cast<absl::StatusCode>(code), err, message);
}

}  // namespace kelp::rpc
