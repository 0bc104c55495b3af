// Options of the mount's chunk-size-tiered read cache (TieredCache, tiered_cache.h), the tier
// layout derived from them, and the arithmetic that maps a blob byte range onto cache blocks.
// The on-disk format these feed is docs/cache-format.md.
//
// Thread-safety: plain values; TierLayout is immutable after construction and may be shared.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/hash.h"
#include "shared/metrics.h"

namespace kelp::mount::cache {

// Blobs are sorted into tiers by their size (the size of the whole blob, not of the read).
enum class Tier : uint8_t { kSmall = 0, kMedium = 1, kLarge = 2 };
inline constexpr int kNumTiers = 3;
std::string_view TierName(Tier tier);  // "small", "medium", "large"
inline int TierIndex(Tier tier) { return static_cast<int>(tier); }

// Which entry to drop when a tier (or the memory layer) is full. All are per tier.
enum class EvictionKind : uint8_t {
  kS3Fifo,  // S3-FIFO (SOSP'23): small probation FIFO + main FIFO with 2-bit reuse counts + ghost.
  kLru,     // least recently used.
  kFifo,    // insertion order (what SeaweedFS does); kept as the benchmark baseline.
};
std::string_view EvictionName(EvictionKind kind);  // "s3fifo", "lru", "fifo"
absl::StatusOr<EvictionKind> ParseEviction(std::string_view name);

struct CacheOptions {
  // Directory holding the disk tiers. Created if missing; the cache owns the names it creates in
  // it (KELPCACHE, LOCK, index, small/, medium/, large/) and leaves anything else alone.
  // Default: "" (no disk tiers: the memory layer alone, if capacity_bytes > 0).
  std::string dir;

  // Upper bound on what `du -s dir` reports, in bytes, metadata included (see
  // docs/cache-format.md, "Capacity accounting"). 0 turns the cache off completely: no memory
  // layer, nothing created under dir, every Read misses. Default: 0.
  uint64_t capacity_bytes = 0;

  // The mount's -chunkSizeLimitMB, in bytes. Tier thresholds are fractions of it.
  // Default: 4 MiB.
  uint64_t chunk_size_limit = 4ull << 20;

  // A blob of size <= small_tier_max * chunk_size_limit is "small" (cached whole, kept in the
  // memory layer too); <= medium_tier_max * chunk_size_limit is "medium"; larger is "large".
  // Defaults: 1/32 (128 KiB for 4 MiB chunks) and 1/2 (2 MiB). 0 < small <= medium.
  double small_tier_max = 1.0 / 32;
  double medium_tier_max = 1.0 / 2;

  // Share of the disk capacity guaranteed to each tier {small, medium, large}, in percent,
  // summing to 100. A tier may grow past its share while others leave theirs unused, but an
  // insert into a tier under its share evicts from a tier over its share first, so a stream of
  // large chunks can never push the small tier below its share. Default: {20, 30, 50}.
  std::array<uint32_t, kNumTiers> tier_shares_percent = {20, 30, 50};

  // Alignment unit (cache block) of medium and large blobs, in bytes: a power of two, at least
  // 4 KiB, at most 16 MiB. Small blobs are cached whole. Defaults: 64 KiB and 256 KiB, so a
  // 16 KiB random read costs at most one 256 KiB fetch and warms the 256 KiB around it.
  uint64_t medium_block_size = 64 << 10;
  uint64_t large_block_size = 256 << 10;

  // RAM for the small tier's in-memory layer, in bytes (a copy of the hottest small blobs, on
  // top of the disk copy; not counted in capacity_bytes, which bounds the disk).
  // 0: no memory layer. Default (nullopt): min(capacity_bytes / 20, 256 MiB).
  std::optional<uint64_t> memory_bytes;

  // Hint for the mount: insert freshly uploaded data (write_through). The cache itself does not
  // look at it. Default: true.
  bool write_through = true;

  // Eviction policy of every tier and of the memory layer. Default: S3-FIFO.
  EvictionKind eviction = EvictionKind::kS3Fifo;

  // After a disk write fails (ENOSPC, EIO, EROFS...), disk inserts are skipped for this long,
  // in milliseconds; reads of what is cached continue. Default: 1000.
  uint32_t disk_error_backoff_ms = 1000;

  // Forgotten entries' files (deleted blobs) are deleted in the background, 16 at a time with
  // this pause between batches while the cache's files fit its capacity, in milliseconds; at
  // full speed when an insert needs their room, and at close. Default: 20 (800 files a second).
  uint32_t forget_pause_ms = 20;

  // Testing only: runs before evicted entries' files are emptied or deleted, on the thread
  // that evicted them (a test holds a deletion in flight). Default: none.
  std::function<void()> testing_before_delete;

  // Where the kelp_cache_* metrics go (tests pass their own registry). nullptr: none.
  // Default: MetricsRegistry::Default(), which the mount serves on /metrics.
  MetricsRegistry* metrics = &MetricsRegistry::Default();
};

// Everything derived from CacheOptions that decides where a block lives. Also recorded in the
// cache's KELPCACHE file: a directory written with a different layout is wiped on open.
struct TierLayout {
  uint64_t small_max = 0;   // largest small blob, bytes
  uint64_t medium_max = 0;  // largest medium blob, bytes
  uint64_t medium_block = 0;
  uint64_t large_block = 0;

  static absl::StatusOr<TierLayout> FromOptions(const CacheOptions& options);

  Tier TierOf(uint64_t blob_size) const {
    if (blob_size <= small_max) return Tier::kSmall;
    if (blob_size <= medium_max) return Tier::kMedium;
    return Tier::kLarge;
  }
  // The alignment unit for a blob: the whole blob for small ones.
  uint64_t BlockSize(uint64_t blob_size) const {
    switch (TierOf(blob_size)) {
      case Tier::kSmall:
        return blob_size;
      case Tier::kMedium:
        return medium_block;
      case Tier::kLarge:
        return large_block;
    }
    return large_block;
  }
  bool operator==(const TierLayout&) const = default;
};

// The key of cache block (fid, block_offset) in the tiers' indexes, the memory layer and the
// eviction policies. Entries also keep the fid itself, so a 64-bit collision is a miss.
inline uint64_t BlockKey(std::string_view fid, uint64_t block_offset) {
  return Hash64WithSeed(fid, block_offset);
}

// Checks ranges and sums; InvalidArgument names the bad field.
absl::Status ValidateOptions(const CacheOptions& options);

// The memory layer size options.memory_bytes resolves to.
uint64_t EffectiveMemoryBytes(const CacheOptions& options);

}  // namespace kelp::mount::cache
