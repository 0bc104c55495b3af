// On-disk format of the mount's read cache directory: names, magics, field offsets and sizes.
// The prose spec, with the reasoning and the recovery rules, is docs/cache-format.md; keep the
// two in step. Bump kFormatVersion on any change here: a directory written with another
// version (or another TierLayout) is wiped and recreated on open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kelp::mount::cache::format {

inline constexpr uint32_t kFormatVersion = 2;

// Top-level names inside CacheOptions::dir. Nothing else there is ours.
inline constexpr char kVersionFile[] = "KELPCACHE";  // text: format version + TierLayout
inline constexpr char kLockFile[] = "LOCK";          // empty; flock()ed by the owning process
inline constexpr char kIndexFile[] = "index";        // binary index hint, written on Close()
inline constexpr char kIndexTmpFile[] = "index.tmp";
inline constexpr const char* kTierDirs[3] = {"small", "medium", "large"};
inline constexpr char kVersionMagic[] = "kelp-cache";  // first word of KELPCACHE

// Integers are little-endian whatever the host (shared/coding.h).
// Every checksum is xxHash3-64 (shared/hash.h), stored little-endian.
// Data is verified per page, so a 16 KiB read of a 256 KiB block hashes 16 KiB, not 256.
inline constexpr uint32_t kPageSize = 4096;

// ---- Entry file: <tier dir>/<entry id as 16 lowercase hex digits>, one cache block. ----
// [fixed header, 48 bytes][fid bytes][page checksum table: u64 per page][zeros][data]
// The zeros are there only for data of at least kAlignedDataMin bytes: they start the data at
// the next multiple of kPageSize, so that each page of data is one page of the file.
inline constexpr uint32_t kEntryMagic = 0x314E454B;  // bytes "KEN1"
inline constexpr uint16_t kEntryVersion = 1;
inline constexpr size_t kEntryFixedLen = 48;
inline constexpr size_t kEntryOffMagic = 0;         // u32
inline constexpr size_t kEntryOffVersion = 4;       // u16
inline constexpr size_t kEntryOffFidLen = 6;        // u16, 1..kMaxFidLen
inline constexpr size_t kEntryOffBlobSize = 8;      // u64, size of the whole blob
inline constexpr size_t kEntryOffBlockOffset = 16;  // u64, offset of this block in the blob
inline constexpr size_t kEntryOffDataLen = 24;      // u32, bytes of data in this block
inline constexpr size_t kEntryOffTier = 28;         // u8; bytes 29..31 are zero
inline constexpr size_t kEntryOffEntryId = 32;      // u64, equals the file name
inline constexpr size_t kEntryOffHeaderSum = 40;    // u64, xxh3 of all header bytes but these 8
inline constexpr size_t kMaxFidLen = 255;
inline constexpr size_t kEntryNameLen = 16;
inline constexpr uint64_t kAlignedDataMin = 64 << 10;

// ---- Index file: a hint of what the tier directories hold, in eviction order. ----
// [header, 32 bytes][records][u64 xxh3 of everything before it]
inline constexpr char kIndexMagic[8] = {'K', 'E', 'L', 'P', 'I', 'D', 'X', '1'};
inline constexpr size_t kIndexHeaderLen =
    32;  // magic, u32 version, u32 zero, u64 count, u64 next id
inline constexpr size_t kIndexRecordFixedLen = 40;
// record: u64 entry id, u64 blob size, u64 block offset, u32 data len, u8 tier,
//         u8 eviction state, u16 fid length, 8 zero bytes, then the fid bytes and the entry's
//         page checksums (u64 each, as in its header).
inline constexpr size_t kIndexTrailerLen = 8;

// Room kept free below the capacity for directory growth that has not been measured yet
// (in-flight inserts each add at most one directory block).
inline constexpr uint64_t kMetaSlackBytes = 64 << 10;

}  // namespace kelp::mount::cache::format
