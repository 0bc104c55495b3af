// Encoding and decoding of needles, index records and the superblock; the layout is in
// needle_format.h and docs/needle-format.md. Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "volume/store/needle_format.h"

namespace kelp::volume {

struct NeedleHeader {
  uint32_t cookie = 0;
  uint64_t key = 0;
  uint32_t size = 0;  // data bytes, or format::kTombstoneSize
  bool tombstone() const { return size == format::kTombstoneSize; }
  uint64_t length() const { return format::NeedleLength(size); }
};

// A verified needle; data points into the buffer it was decoded from.
struct DecodedNeedle {
  NeedleHeader header;
  std::string_view data;
  uint64_t checksum = 0;
  uint64_t append_time_ns = 0;
};

// Appends the encoded needle (padding included) to *out. data.size() must be at most
// format::kMaxDataSize.
void EncodeNeedle(uint64_t key, uint32_t cookie, std::string_view data, uint64_t checksum,
                  uint64_t append_time_ns, std::string* out);
void EncodeTombstone(uint64_t key, uint32_t cookie, uint64_t append_time_ns, std::string* out);

// Reads a header from format::kHeaderSize bytes.
NeedleHeader DecodeHeader(const char* p);

// Parses a whole needle from buf (at least header.length() bytes) and verifies its checksum.
// DataLoss if the buffer is too short or the checksum does not match.
absl::StatusOr<DecodedNeedle> DecodeNeedle(std::string_view buf);

struct IndexRecord {
  uint64_t key = 0;
  uint32_t offset_units = 0;  // needle offset / format::kAlignment
  uint32_t size = 0;          // data bytes, or format::kTombstoneSize
  bool tombstone() const { return size == format::kTombstoneSize; }
  uint64_t offset() const { return uint64_t{offset_units} * format::kAlignment; }
  uint64_t end() const { return offset() + format::NeedleLength(size); }
};

void EncodeIndexRecord(const IndexRecord& r, char* out);  // format::kIndexRecordSize bytes
IndexRecord DecodeIndexRecord(const char* p);

struct Superblock {
  std::string replication = "000";  // three digits
  uint16_t compaction_revision = 0;
};
std::string EncodeSuperblock(const Superblock& sb);
// InvalidArgument if the bytes are not a superblock of a version this code reads.
absl::StatusOr<Superblock> DecodeSuperblock(std::string_view bytes);

}  // namespace kelp::volume
