// On-disk layout of a volume: the .dat file of needles and the .idx file of index records.
// The prose spec, with the reasons behind each choice, is docs/needle-format.md; keep the two
// in step. All integers are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kelp::volume::format {

// ---- .dat superblock (offset 0) -------------------------------------------------------
//   magic u32 | version u8 | replication char[3] | compaction_revision u16 | reserved u8[6]
inline constexpr uint32_t kSuperblockMagic = 0x5650'4C4B;  // "KLPV" on disk
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kSuperblockSize = 16;

// ---- needles ----------------------------------------------------------------------------
// Each needle starts at a multiple of kAlignment:
//   header:  cookie u32 | key u64 | size u32          (kHeaderSize bytes)
//   data:    size bytes (none for a tombstone)
//   footer:  checksum u64 (xxHash3-64 of data) | append_time_ns u64   (kFooterSize bytes)
//   padding: zero bytes up to the next multiple of kAlignment
inline constexpr size_t kAlignment = 8;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kFooterSize = 16;
inline constexpr size_t kCookieOffset = 0;
inline constexpr size_t kKeyOffset = 4;
inline constexpr size_t kSizeOffset = 12;

// The size of a tombstone needle (a delete record). Real data is always smaller.
inline constexpr uint32_t kTombstoneSize = 0xFFFF'FFFF;
// Largest data size a needle may carry (4 GiB - 64 KiB); the server's -fileSizeLimitMB is
// far below it.
inline constexpr uint32_t kMaxDataSize = 0xFFFF'0000;

// Offsets are stored in units of kAlignment in a u32, so a .dat file holds at most 32 GiB.
inline constexpr uint64_t kMaxDatSize = uint64_t{0xFFFF'FFFF} * kAlignment;

// Total bytes a needle with `size` data bytes occupies, padding included.
constexpr uint64_t NeedleLength(uint32_t size) {
  uint64_t data = size == kTombstoneSize ? 0 : size;
  return (kHeaderSize + data + kFooterSize + kAlignment - 1) / kAlignment * kAlignment;
}

// ---- .idx records -----------------------------------------------------------------------
//   key u64 | offset u32 (in units of kAlignment) | size u32 (data size, or kTombstoneSize)
// One record per needle, in the order the needles sit in the .dat file.
inline constexpr size_t kIndexRecordSize = 16;

}  // namespace kelp::volume::format
