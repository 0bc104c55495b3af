#include "shared/security/jwt.h"

#include <catch2/catch.hpp>

using namespace kelp;
using namespace kelp::security;

namespace {

JwtKey Key(std::string k, int expires = 10) { return JwtKey{std::move(k), expires}; }

FileId Fid(uint32_t vid, uint64_t key, uint32_t cookie) { return FileId{vid, key, cookie}; }

// base64url of a JSON text, no padding.
std::string B64(std::string_view s) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8) | uint8_t(s[i + 2]);
    for (int j = 18; j >= 0; j -= 6) out += k[(v >> j) & 63];
  }
  if (s.size() - i == 1) {
    uint32_t v = uint8_t(s[i]) << 16;
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
  } else if (s.size() - i == 2) {
    uint32_t v = (uint8_t(s[i]) << 16) | (uint8_t(s[i + 1]) << 8);
    for (int j = 18; j >= 6; j -= 6) out += k[(v >> j) & 63];
  }
  return out;
}

}  // namespace

TEST_CASE("a file id token covers its fid and the siblings of its assignment, nothing else") {
  JwtKey k = Key("0123456789abcdef0123");
  FileId base = Fid(3, 0x10, 0x637037d6);
  std::string t = SignFileIdToken(k, base, 4, 1000);
  REQUIRE_FALSE(t.empty());
  CHECK(VerifyFileIdToken(k, t, base, 1001).ok());
  CHECK(VerifyFileIdToken(k, t, Fid(3, 0x13, 0x637037d6), 1001).ok());  // sibling 3 of 4
  CHECK(VerifyFileIdToken(k, t, Fid(3, 0x14, 0x637037d6), 1001).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(k, t, Fid(3, 0x0f, 0x637037d6), 1001).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(k, t, Fid(4, 0x10, 0x637037d6), 1001).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(k, t, Fid(3, 0x10, 0x637037d7), 1001).code() == absl::StatusCode::kUnauthenticated);
  // One fid without count covers that fid alone.
  std::string one = SignFileIdToken(k, base, 1, 1000);
  CHECK(VerifyFileIdToken(k, one, base, 1001).ok());
  CHECK_FALSE(VerifyFileIdToken(k, one, Fid(3, 0x11, 0x637037d6), 1001).ok());
}

TEST_CASE("tokens expire, and other keys, tampering and alg none are refused") {
  JwtKey k = Key("0123456789abcdef0123", 10);
  FileId f = Fid(1, 1, 1);
  std::string t = SignFileIdToken(k, f, 1, 1000);
  CHECK(VerifyFileIdToken(k, t, f, 1009).ok());
  CHECK(VerifyFileIdToken(k, t, f, 1010).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(Key("another-key-of-16-bytes"), t, f, 1001).code() ==
        absl::StatusCode::kUnauthenticated);
  std::string tampered = t;
  tampered[tampered.find('.') + 3] ^= 1;
  CHECK_FALSE(VerifyFileIdToken(k, tampered, f, 1001).ok());
  std::string none = B64(R"({"alg":"none","typ":"JWT"})") + "." + B64(R"({"fid":"1,0100000001"})") + ".";
  CHECK(VerifyFileIdToken(k, none, f, 1001).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(k, "", f, 1001).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(k, "garbage", f, 1001).code() == absl::StatusCode::kUnauthenticated);
  CHECK(VerifyFileIdToken(k, std::string(10000, 'a'), f, 1001).code() == absl::StatusCode::kUnauthenticated);
  // A filer token is no file id token.
  CHECK_FALSE(VerifyFileIdToken(k, SignFilerToken(k, 10, 1000), f, 1001).ok());
  // Messages never carry the token.
  CHECK(std::string(VerifyFileIdToken(k, t, Fid(2, 2, 2), 1001).message()).find(t) == std::string::npos);
}

TEST_CASE("filer tokens: signature and expiry, or none at all") {
  JwtKey k = Key("filer-key-0123456789");
  CHECK(VerifyFilerToken(k, SignFilerToken(k, 60, 1000), 1059).ok());
  CHECK_FALSE(VerifyFilerToken(k, SignFilerToken(k, 60, 1000), 1060).ok());
  CHECK(VerifyFilerToken(k, SignFilerToken(k, 0, 1000), 99999999).ok());  // no exp claim
  CHECK_FALSE(VerifyFilerToken(k, SignFilerToken(Key("some-other-key-0123"), 60, 1000), 1001).ok());
  CHECK(SignFilerToken(Key(""), 60, 1000).empty());
}

TEST_CASE("the token of a request: Bearer header, then ?jwt=") {
  CHECK(TokenOf("Bearer abc.def.ghi", std::nullopt) == "abc.def.ghi");
  CHECK(TokenOf("BEARER   abc", std::nullopt) == "abc");
  CHECK(TokenOf("", std::string("q.r.s")) == "q.r.s");
  CHECK(TokenOf("Basic dXNlcg==", std::nullopt).empty());
  CHECK(TokenOf("", std::nullopt).empty());
}
