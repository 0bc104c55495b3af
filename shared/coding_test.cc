#include "shared/coding.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <catch2/catch.hpp>

namespace kelp {
namespace {

std::string Bytes(std::initializer_list<uint8_t> b) { return std::string(b.begin(), b.end()); }

// What put appends to an empty string.
template <typename T>
std::string Put(void (*put)(std::string*, T), T v) {
  std::string s;
  put(&s, v);
  return s;
}

}  // namespace

TEST_CASE("fixed little-endian: the low byte first, whatever the host") {
  char b[8];
  EncodeFixed16LE(b, 0xBEEF);
  CHECK(std::string(b, 2) == Bytes({0xEF, 0xBE}));
  CHECK(DecodeFixed16LE(b) == 0xBEEF);
  EncodeFixed32LE(b, 0x314E454B);  // the cache entry magic: "KEN1" on disk
  CHECK(std::string(b, 4) == "KEN1");
  CHECK(DecodeFixed32LE(b) == 0x314E454B);
  EncodeFixed64LE(b, 0x0807060504030201);
  CHECK(std::string(b, 8) == Bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK(DecodeFixed64LE(b) == 0x0807060504030201);
  // Bytes with the high bit set are not sign-extended.
  std::string high = Bytes({0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8});
  CHECK(DecodeFixed16LE(high.data()) == 0xFEFF);
  CHECK(DecodeFixed32LE(high.data()) == 0xFCFDFEFF);
  CHECK(DecodeFixed64LE(high.data()) == 0xF8F9FAFBFCFDFEFF);
  // Only the field's own bytes are written.
  std::string buf(6, 'x');
  EncodeFixed32LE(buf.data() + 1, 0);
  CHECK(buf == std::string("x") + std::string(4, '\0') + "x");
}

TEST_CASE("fixed big-endian: byte order is numeric order") {
  std::string out;
  PutFixed32BE(&out, 0x01020304);
  PutFixed64BE(&out, 0x1112131415161718);
  CHECK(out == Bytes({1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}));
  std::string_view in = out;
  uint32_t a = 0;
  uint64_t b = 0;
  REQUIRE(GetFixed32BE(&in, &a));
  REQUIRE(GetFixed64BE(&in, &b));
  CHECK(a == 0x01020304);
  CHECK(b == 0x1112131415161718);
  CHECK(in.empty());
  // Too short: false, and nothing consumed.
  std::string_view shortv = std::string_view(out).substr(0, 7);
  CHECK_FALSE(GetFixed64BE(&shortv, &b));
  CHECK(shortv.size() == 7);
  std::string_view three = std::string_view(out).substr(0, 3);
  CHECK_FALSE(GetFixed32BE(&three, &a));
  CHECK(three.size() == 3);
  CHECK(DecodeFixed64BE(std::string_view(out).substr(4)) == 0x1112131415161718);
  CHECK(DecodeFixed64BE("short") == 0);

  std::string lo, hi;
  PutFixed64BE(&lo, 255);
  PutFixed64BE(&hi, 256);
  CHECK(lo < hi);
}

TEST_CASE("varints: LEB128, seven bits a byte, low group first") {
  auto enc = [](uint64_t v) { return Put(PutVarint64, v); };
  CHECK(enc(0) == Bytes({0}));
  CHECK(enc(127) == Bytes({0x7F}));
  CHECK(enc(128) == Bytes({0x80, 0x01}));
  CHECK(enc(300) == Bytes({0xAC, 0x02}));
  CHECK(enc(std::numeric_limits<uint64_t>::max()) ==
        Bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{16383},
                     uint64_t{16384}, uint64_t{1} << 35, std::numeric_limits<uint64_t>::max()}) {
    std::string s = enc(v) + "tail";
    std::string_view in = s;
    uint64_t got = 0;
    REQUIRE(GetVarint64(&in, &got));
    CHECK(got == v);
    CHECK(in == "tail");
  }
  uint64_t v = 0;
  std::string_view truncated = "\x80\x80";
  CHECK_FALSE(GetVarint64(&truncated, &v));
  std::string eleven(11, '\x80');
  std::string_view too_long = eleven;
  CHECK_FALSE(GetVarint64(&too_long, &v));
  std::string_view empty;
  CHECK_FALSE(GetVarint64(&empty, &v));
}

TEST_CASE("signed varints: zigzag, small magnitudes stay short") {
  auto enc = [](int64_t v) { return Put(PutVarsint64, v); };
  CHECK(enc(0) == Bytes({0}));
  CHECK(enc(-1) == Bytes({1}));
  CHECK(enc(1) == Bytes({2}));
  CHECK(enc(-2) == Bytes({3}));
  CHECK(enc(-64) == Bytes({0x7F}));
  CHECK(enc(64) == Bytes({0x80, 0x01}));
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, int64_t{-1'000'000'000'000},
                    std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    std::string s = enc(v);
    std::string_view in = s;
    int64_t got = 0;
    REQUIRE(GetVarsint64(&in, &got));
    CHECK(got == v);
    CHECK(in.empty());
  }
}

TEST_CASE("length-prefixed strings: a varint length, then the bytes") {
  std::string out;
  PutLengthPrefixed(&out, "abc");
  PutLengthPrefixed(&out, "");
  PutLengthPrefixed(&out, std::string(200, 'z'));
  CHECK(out.substr(0, 5) == Bytes({3, 'a', 'b', 'c', 0}));
  CHECK(out.substr(5, 2) == Bytes({0xC8, 0x01}));
  std::string_view in = out, s;
  REQUIRE(GetLengthPrefixed(&in, &s));
  CHECK(s == "abc");
  REQUIRE(GetLengthPrefixed(&in, &s));
  CHECK(s.empty());
  REQUIRE(GetLengthPrefixed(&in, &s));
  CHECK(s == std::string(200, 'z'));
  CHECK(in.empty());
  std::string_view cut = std::string_view(out).substr(0, 3);  // says 3 bytes, has 2
  CHECK_FALSE(GetLengthPrefixed(&cut, &s));
}

}  // namespace kelp
