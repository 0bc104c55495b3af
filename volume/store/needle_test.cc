#include "volume/store/needle.h"

#include <catch2/catch.hpp>

#include "shared/coding.h"
#include "shared/hash.h"

using namespace kelp::volume;

TEST_CASE("needle length is header + data + footer, padded to 8") {
  CHECK(format::NeedleLength(0) == 32);
  CHECK(format::NeedleLength(1) == 40);
  CHECK(format::NeedleLength(8) == 40);
  CHECK(format::NeedleLength(1024) == 1056);
  CHECK(format::NeedleLength(format::kTombstoneSize) == 32);
}

TEST_CASE("needle round-trips through encode and decode") {
  std::string data = "hello, needle";
  std::string buf = "prefix";
  EncodeNeedle(0x1637, 0xdeadbeef, data, kelp::Hash64(data), 123456789, &buf);
  REQUIRE(buf.size() == 6 + format::NeedleLength(data.size()));
  auto n = DecodeNeedle(std::string_view(buf).substr(6));
  REQUIRE(n.ok());
  CHECK(n->header.key == 0x1637);
  CHECK(n->header.cookie == 0xdeadbeef);
  CHECK(n->header.size == data.size());
  CHECK_FALSE(n->header.tombstone());
  CHECK(n->data == data);
  CHECK(n->checksum == kelp::Hash64(data));
  CHECK(n->append_time_ns == 123456789);
  // Padding is zero.
  for (size_t i = 6 + 16 + data.size() + 16; i < buf.size(); ++i) CHECK(buf[i] == '\0');
}

TEST_CASE("empty needle and tombstone decode") {
  std::string buf;
  EncodeNeedle(7, 1, "", kelp::Hash64(""), 1, &buf);
  auto n = DecodeNeedle(buf);
  REQUIRE(n.ok());
  CHECK(n->data.empty());
  buf.clear();
  EncodeTombstone(7, 1, 2, &buf);
  CHECK(buf.size() == 32);
  n = DecodeNeedle(buf);
  REQUIRE(n.ok());
  CHECK(n->header.tombstone());
  CHECK(n->data.empty());
}

TEST_CASE("a flipped bit anywhere in the data or checksum is detected") {
  std::string data(100, 'x');
  std::string good;
  EncodeNeedle(1, 2, data, kelp::Hash64(data), 3, &good);
  for (size_t i = format::kHeaderSize; i < format::kHeaderSize + data.size() + 8; ++i) {
    std::string bad = good;
    bad[i] ^= 0x10;
    auto n = DecodeNeedle(bad);
    INFO("byte " << i);
    CHECK(n.status().code() == absl::StatusCode::kDataLoss);
  }
}

TEST_CASE("truncated needles are rejected, never decoded") {
  std::string data(50, 'y');
  std::string good;
  EncodeNeedle(1, 2, data, kelp::Hash64(data), 3, &good);
  for (size_t len = 0; len < good.size(); ++len) {
    auto n = DecodeNeedle(std::string_view(good).substr(0, len));
    INFO("length " << len);
    CHECK(n.status().code() == absl::StatusCode::kDataLoss);
  }
}

TEST_CASE("an impossible size field is rejected") {
  std::string buf(64, '\0');
  kelp::EncodeFixed32LE(buf.data() + format::kSizeOffset, format::kMaxDataSize + 1);
  CHECK(DecodeNeedle(buf).status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("all-zero bytes are not a needle") {
  std::string zeros(64, '\0');
  CHECK_FALSE(DecodeNeedle(zeros).ok());
}

TEST_CASE("index records and superblocks round-trip") {
  char rec[format::kIndexRecordSize];
  EncodeIndexRecord(IndexRecord{0x0102030405060708ull, 0xa0b0c0d0, format::kTombstoneSize}, rec);
  IndexRecord r = DecodeIndexRecord(rec);
  CHECK(r.key == 0x0102030405060708ull);
  CHECK(r.offset_units == 0xa0b0c0d0);
  CHECK(r.tombstone());
  CHECK(r.offset() == uint64_t{0xa0b0c0d0} * 8);
  CHECK(static_cast<uint8_t>(rec[0]) == 0x08);  // little-endian on disk

  Superblock sb{"012", 513};
  auto d = DecodeSuperblock(EncodeSuperblock(sb));
  REQUIRE(d.ok());
  CHECK(d->replication == "012");
  CHECK(d->compaction_revision == 513);
  std::string bad = EncodeSuperblock(sb);
  bad[0] = 'X';
  CHECK_FALSE(DecodeSuperblock(bad).ok());
  bad = EncodeSuperblock(sb);
  bad[4] = 9;  // future version
  CHECK_FALSE(DecodeSuperblock(bad).ok());
  CHECK_FALSE(DecodeSuperblock("short").ok());
}
