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
