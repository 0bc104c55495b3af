// The frame format of Kelp's RPC transport (shared/rpc), the wire under the filer's metadata
// API. Spec: docs/rpc-protocol.md (this header and that document point at each other).
//
// A connection starts as HTTP/1.1 on the server's HTTP port and is upgraded
// (`Upgrade: kelp-rpc/1`, answered `101 Switching Protocols`); from then on both directions
// carry frames. Every frame is a 16-byte header and a payload, integers little-endian:
//
//   offset size field
//        0    4 length    bytes after this field: 12 + payload size
//        4    1 type      FrameType
//        5    1 flags     0 (reserved)
//        6    2 method    REQUEST: the method number; else 0
//        8    8 call id   chosen by the client, unique among its calls in flight
//       16    - payload   REQUEST, REPLY, STREAM: one serialized protobuf message
//                         ERROR: u32 status code, i32 errno (0: none), UTF-8 message
//                         CANCEL: empty
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp::rpc {

inline constexpr size_t kFrameHeaderSize = 16;
// The length field counts the header bytes after itself.
inline constexpr size_t kLengthFieldSize = 4;
// Largest payload either side accepts by default (a file with millions of chunk records).
inline constexpr size_t kDefaultMaxPayload = 256u << 20;
// The HTTP Upgrade token that switches a connection to frames.
inline constexpr std::string_view kUpgradeProtocol = "kelp-rpc/1";
// The request target of the upgrade request.
inline constexpr std::string_view kUpgradePath = "/rpc";
// Longest upgrade request head (server's own listener) and 101 answer (client) accepted.
inline constexpr size_t kMaxUpgradeHead = 16 << 10;
// Upgrade request header naming the client: an id of 1-16 hex digits, not 0, the same on
// every connection of one client. The server runs the calls it reads there with that caller
// id (shared/rpc/caller.h). Optional; docs/rpc-protocol.md.
inline constexpr std::string_view kClientHeader = "Kelp-Client";

enum class FrameType : uint8_t {
  kRequest = 1,  // client -> server: call `method` with the payload as its request
  kReply = 2,    // server -> client: the call succeeded; payload = response (a stream's end: empty)
  kError = 3,    // server -> client: the call failed; payload = status
  kStream = 4,   // server -> client: one message of a streamed response; more follow
  kCancel = 5,   // client -> server: stop the call (a stream); no answer
};

struct FrameHeader {
  FrameType type = FrameType::kRequest;
  uint8_t flags = 0;
  uint16_t method = 0;
  uint64_t id = 0;
  uint32_t payload_size = 0;
};

// Writes the kFrameHeaderSize bytes of a header for a payload of payload_size bytes at dst.
void EncodeFrameHeader(char* dst, FrameType type, uint16_t method, uint64_t id, size_t payload_size);
// Appends a header to out.
void AppendFrameHeader(std::string* out, FrameType type, uint16_t method, uint64_t id, size_t payload_size);

// Decodes the frame at the start of data. Returns the frame's total size (header + payload)
// and fills *header when data holds a whole frame; 0 when more bytes are needed;
// InvalidArgument when the bytes cannot be a frame (unknown type, non-zero flags, a length
// below the header's or a payload above max_payload): the connection must be closed.
absl::StatusOr<size_t> DecodeFrame(std::string_view data, size_t max_payload, FrameHeader* header);

// The upgrade request at the start of data (a server's own listener): the size of its head
// once whole, 0 while incomplete; InvalidArgument when it is malformed, does not ask for
// kUpgradeProtocol, or is still incomplete past kMaxUpgradeHead (answer 400 and close).
// *client (if not null) gets its Kelp-Client id, 0 without one; a malformed one is
// InvalidArgument too.
absl::StatusOr<size_t> ParseUpgradeRequest(std::string_view data, uint64_t* client = nullptr);
// A Kelp-Client header's value: 1-16 hex digits, not all zero; absent ("") is 0.
absl::StatusOr<uint64_t> ParseClientId(std::string_view value);
// The header line ("Kelp-Client: <hex>\r\n") that names client id.
std::string ClientIdHeader(uint64_t id);
// The server's answer to it (client): the size of the 101 head once whole, 0 while
// incomplete; FailedPrecondition naming the status when it is not 101, InvalidArgument when
// it is malformed or longer than kMaxUpgradeHead. Bytes after the head are frames (or TLS).
absl::StatusOr<size_t> ParseUpgradeResponse(std::string_view data);

// ERROR payloads: the status code, the errno it carries (shared/status.h) and its message.
std::string EncodeStatus(const absl::Status& status);
// A malformed payload decodes to an Internal error that says so.
absl::Status DecodeStatus(std::string_view payload);

}  // namespace kelp::rpc
