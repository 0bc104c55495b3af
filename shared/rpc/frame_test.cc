#include "shared/rpc/frame.h"

#include <cerrno>

#include <catch2/catch.hpp>

#include "shared/status.h"

namespace kelp::rpc {
namespace {

TEST_CASE("frame: a header round-trips and the payload follows it") {
  std::string f;
  AppendFrameHeader(&f, FrameType::kRequest, 513, 0x0102030405060708ull, 5);
  f += "hello";
  FrameHeader h;
  auto n = DecodeFrame(f, 1024, &h);
  REQUIRE(n.ok());
  CHECK(*n == kFrameHeaderSize + 5);
  CHECK(h.type == FrameType::kRequest);
  CHECK(h.method == 513);
  CHECK(h.id == 0x0102030405060708ull);
  CHECK(h.payload_size == 5);
  CHECK(f.substr(kFrameHeaderSize) == "hello");
}

TEST_CASE("frame: a partial frame asks for more bytes, every prefix of it") {
  std::string f;
  AppendFrameHeader(&f, FrameType::kReply, 0, 7, 100);
  f += std::string(100, 'x');
  for (size_t len = 0; len < f.size(); ++len) {
    FrameHeader h;
    auto n = DecodeFrame(std::string_view(f).substr(0, len), 1024, &h);
    REQUIRE(n.ok());
    CHECK(*n == 0);
  }
}

TEST_CASE("frame: malformed headers are errors, not crashes") {
  FrameHeader h;
  std::string short_len("\x03\x00\x00\x00", 4);  // below the header size
  CHECK(DecodeFrame(short_len, 1024, &h).status().code() == absl::StatusCode::kInvalidArgument);

  std::string big;
  AppendFrameHeader(&big, FrameType::kRequest, 1, 1, 2048);
  CHECK(DecodeFrame(big, 1024, &h).status().code() == absl::StatusCode::kInvalidArgument);

  std::string bad_type;
  AppendFrameHeader(&bad_type, FrameType::kRequest, 1, 1, 0);
  bad_type[4] = 9;
  CHECK(!DecodeFrame(bad_type, 1024, &h).ok());
  bad_type[4] = 0;
  CHECK(!DecodeFrame(bad_type, 1024, &h).ok());

  std::string flags;
  AppendFrameHeader(&flags, FrameType::kRequest, 1, 1, 0);
  flags[5] = 1;
  CHECK(!DecodeFrame(flags, 1024, &h).ok());
}

TEST_CASE("frame: a Kelp-Client id is 1 to 16 hex digits and not 0") {
  CHECK(*ParseClientId("") == 0);  // no header: no id
  CHECK(*ParseClientId("1") == 1);
  CHECK(*ParseClientId("00ABcdef") == 0xabcdef);
  CHECK(*ParseClientId("ffffffffffffffff") == ~uint64_t{0});
  for (std::string_view bad : {"0", "0000", "12345678901234567", "12g4", " 12", "-1"}) {
    INFO(bad);
    CHECK(ParseClientId(bad).status().code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(ClientIdHeader(0x1f) == "Kelp-Client: 000000000000001f\r\n");
  uint64_t id = 7;
  std::string head =
      "GET /rpc HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: kelp-rpc/1\r\n";
  CHECK(*ParseUpgradeRequest(head + ClientIdHeader(0x1f) + "\r\n", &id) > 0);
  CHECK(id == 0x1f);
  CHECK(*ParseUpgradeRequest(head + "\r\n", &id) > 0);
  CHECK(id == 0);
  CHECK(ParseUpgradeRequest(head + "Kelp-Client: zz\r\n\r\n", &id).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("frame: error payloads keep the code, the errno and the message") {
  absl::Status s = DecodeStatus(EncodeStatus(PosixError(ENOTEMPTY, "dir not empty")));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(ErrnoOf(s) == ENOTEMPTY);
  CHECK(s.message() == "dir not empty");

  absl::Status plain = DecodeStatus(EncodeStatus(absl::UnavailableError("gone")));
  CHECK(plain.code() == absl::StatusCode::kUnavailable);
  CHECK(ErrnoOf(plain) == EIO);

  CHECK(DecodeStatus("abc").code() == absl::StatusCode::kInternal);
  CHECK(DecodeStatus(std::string(8, '\0')).code() == absl::StatusCode::kInternal);  // code 0 is no error
}

}  // namespace
}  // namespace kelp::rpc
