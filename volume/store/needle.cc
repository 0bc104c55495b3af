#include "volume/store/needle.h"

#include <cstring>

#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/strings.h"

namespace kelp::volume {

namespace {

void AppendNeedle(uint64_t key, uint32_t cookie, uint32_t size_field, std::string_view data,
                  uint64_t checksum, uint64_t append_time_ns, std::string* out) {
  size_t start = out->size();
  out->resize(start + format::NeedleLength(size_field), '\0');
  char* p = out->data() + start;
  EncodeFixed32LE(p + format::kCookieOffset, cookie);
  EncodeFixed64LE(p + format::kKeyOffset, key);
  EncodeFixed32LE(p + format::kSizeOffset, size_field);
  if (!data.empty()) memcpy(p + format::kHeaderSize, data.data(), data.size());
  char* footer = p + format::kHeaderSize + data.size();
  EncodeFixed64LE(footer, checksum);
  EncodeFixed64LE(footer + 8, append_time_ns);
}

}  // namespace

void EncodeNeedle(uint64_t key, uint32_t cookie, std::string_view data, uint64_t checksum,
                  uint64_t append_time_ns, std::string* out) {
  AppendNeedle(key, cookie, static_cast<uint32_t>(data.size()), data, checksum, append_time_ns,
               out);
}

void EncodeTombstone(uint64_t key, uint32_t cookie, uint64_t append_time_ns, std::string* out) {
  AppendNeedle(key, cookie, format::kTombstoneSize, {}, Hash64("", 0), append_time_ns, out);
}

NeedleHeader DecodeHeader(const char* p) {
  return NeedleHeader{DecodeFixed32LE(p + format::kCookieOffset), DecodeFixed64LE(p + format::kKeyOffset),
                      DecodeFixed32LE(p + format::kSizeOffset)};
}

absl::StatusOr<DecodedNeedle> DecodeNeedle(std::string_view buf) {
  if (buf.size() < format::kHeaderSize)
    return absl::DataLossError("needle shorter than its header");
  DecodedNeedle n;
  n.header = DecodeHeader(buf.data());
  if (!n.header.tombstone() && n.header.size > format::kMaxDataSize) {
    return absl::DataLossError(kelp::StrCat("needle size ", n.header.size, " is impossible"));
  }
  if (buf.size() < n.header.length()) {
    return absl::DataLossError(
        kelp::StrCat("needle truncated: ", buf.size(), " of ", n.header.length(), " bytes"));
  }
  size_t data_size = n.header.tombstone() ? 0 : n.header.size;
  n.data = buf.substr(format::kHeaderSize, data_size);
  const char* footer = buf.data() + format::kHeaderSize + data_size;
  n.checksum = DecodeFixed64LE(footer);
  n.append_time_ns = DecodeFixed64LE(footer + 8);
  uint64_t actual = Hash64(n.data.data(), n.data.size());
  if (actual != n.checksum) {
    return absl::DataLossError(kelp::StrCat("needle ", n.header.key, " checksum mismatch: stored ",
                                            n.checksum, ", computed ", actual));
  }
  return n;
}

void EncodeIndexRecord(const IndexRecord& r, char* out) {
  EncodeFixed64LE(out, r.key);
  EncodeFixed32LE(out + 8, r.offset_units);
  EncodeFixed32LE(out + 12, r.size);
}

IndexRecord DecodeIndexRecord(const char* p) {
  return IndexRecord{DecodeFixed64LE(p), DecodeFixed32LE(p + 8), DecodeFixed32LE(p + 12)};
}

std::string EncodeSuperblock(const Superblock& sb) {
  std::string out(format::kSuperblockSize, '\0');
  EncodeFixed32LE(out.data(), format::kSuperblockMagic);
  out[4] = static_cast<char>(format::kVersion);
  for (int i = 0; i < 3; ++i)
    out[5 + i] = i < static_cast<int>(sb.replication.size()) ? sb.replication[i] : '0';
  EncodeFixed16LE(out.data() + 8, sb.compaction_revision);
  return out;
}

absl::StatusOr<Superblock> DecodeSuperblock(std::string_view bytes) {
  if (bytes.size() < format::kSuperblockSize || DecodeFixed32LE(bytes.data()) != format::kSuperblockMagic) {
    return absl::InvalidArgumentError("not a kelp volume (bad superblock magic)");
  }
  if (static_cast<uint8_t>(bytes[4]) != format::kVersion) {
    return absl::InvalidArgumentError(kelp::StrCat(
        "unsupported volume format version ", static_cast<int>(static_cast<uint8_t>(bytes[4]))));
  }
  Superblock sb;
  sb.replication.assign(bytes.data() + 5, 3);
  for (char c : sb.replication) {
    if (c < '0' || c > '9') return absl::InvalidArgumentError("bad replication in superblock");
  }
  sb.compaction_revision = DecodeFixed16LE(bytes.data() + 8);
  return sb;
}

}  // namespace kelp::volume
