// The mount's local read cache, tiered by chunk (blob) size: a standalone library the FUSE read
// path calls. Blobs are immutable and named by their file id ("3,01637037d6"), so an entry,
// keyed by (fid, aligned block offset), never goes stale and needs no invalidation.
//
//   small blobs  (<= 1/32 chunk limit)  cached whole, in RAM and on disk
//   medium blobs (<= 1/2 chunk limit)   cached in 64 KiB aligned blocks, on disk
//   large blobs                         cached in 256 KiB aligned blocks, on disk
//
// Each tier has a guaranteed share of the disk capacity (CacheOptions), so a stream of large
// chunks cannot evict small hot ones. Every entry is checksummed (xxHash3 per 4 KiB page) and
// verified on every read. Nothing here ever fails the caller: a corrupt entry, a full or broken
// disk, an unusable directory all degrade to misses (counted in GetStats() and kelp_cache_*
// metrics). The directory survives restarts; see docs/cache-format.md and docs/cache.md.
//
// Read path (one blob piece [off, off+len) of blob `fid` whose size is S):
//
//   if (!cache->Read(fid, S, off, len, dst)) {
//     auto r = cache->FetchRange(S, off, len);          // aligned block(s) covering it
//     std::string data = HttpGetRange(fid, r.begin, r.end);
//     memcpy(dst, data.data() + (off - r.begin), len);
//     cache->Insert(fid, S, r.begin, data);
//   }
//
// Thread-safety: every method may be called from any thread concurrently (FUSE workers,
// read-ahead and upload threads), except Close(), which the owner calls once after the last
// reader is done (calls after it are harmless: the disk tiers miss and skip inserts). No lock is
// held across disk I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "mount/cache/cache_options.h"
#include "mount/cache/chunk_cache.h"
#include "mount/cache/cache_stats.h"

namespace kelp::mount::cache {

class DiskCache;
class MemoryLayer;

class TieredCache : public ChunkCache {
 public:
  // Opens the cache. InvalidArgument only for bad options (the mount reports those as flag
  // errors); a directory that cannot be used is logged and the cache runs without disk tiers.
  // capacity_bytes == 0 gives a disabled cache that touches nothing on disk.
  static absl::StatusOr<std::unique_ptr<TieredCache>> Open(CacheOptions options);
  ~TieredCache() override;  // Close()
  TieredCache(const TieredCache&) = delete;
  TieredCache& operator=(const TieredCache&) = delete;

  bool enabled() const { return enabled_; }
  const CacheOptions& options() const { return options_; }
  // Hint for the write path: insert freshly uploaded blobs (CacheOptions::write_through).
  bool write_through() const override { return enabled_ && options_.write_through; }

  Tier TierOf(uint64_t blob_size) const { return layout_.TierOf(blob_size); }
  // Alignment unit of a blob of this size: the whole blob for small blobs.
  uint64_t BlockSize(uint64_t blob_size) const override { return layout_.BlockSize(blob_size); }

  struct ByteRange {
    uint64_t begin = 0, end = 0;
    uint64_t size() const { return end - begin; }
  };
  // The block-aligned range of the blob to fetch on a miss of [offset, offset + len): insert
  // exactly what it says and every block of it gets cached.
  ByteRange FetchRange(uint64_t blob_size, uint64_t offset, uint64_t len) const;

  // Copies bytes [offset, offset + len) of blob fid (of size blob_size) into dst and returns
  // true if every block they touch is cached and verifies; false otherwise (dst is then
  // unspecified). Counts one hit or miss per block looked at.
  bool Read(std::string_view fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst) override;

  // Caches every whole block of the blob contained in data, which holds blob bytes
  // [offset, offset + data.size()). A block is whole when it starts on a block boundary and
  // runs to the next one or to the blob's end. Returns how many blocks were stored (in RAM or
  // on disk); blocks already cached (or being stored by another thread) are skipped.
  size_t Insert(std::string_view fid, uint64_t blob_size, uint64_t offset, std::string_view data) override;

  // Whether `bytes` of blocks fit on disk with no eviction and a sixteenth of the capacity to
  // spare (every tier shares the one capacity; true without disk tiers: the memory layer
  // admits by its own rule).
  bool HasRoom(uint64_t bytes) const override;

  // Drops the blob's blocks from memory and disk (counted as kelp_cache_forgotten_total).
  void Forget(std::string_view fid, uint64_t blob_size) override;

  // Counters since Open plus current usage, per tier. Summary() gives the unmount log line.
  CacheStats GetStats() const;

  // Saves the index (so the next Open is warm and fast) and logs the summary line.
  void Close();

 private:
  TieredCache(CacheOptions options, TierLayout layout);
  // Looks up one block; adds a hit or miss.
  bool ReadBlock(Tier tier, std::string_view fid, uint64_t blob_size, uint64_t block_offset,
                 uint64_t block_len, uint64_t offset_in_block, size_t len, char* dst);
  bool InsertBlock(Tier tier, std::string_view fid, uint64_t blob_size, uint64_t block_offset,
                   std::string_view data);

  const CacheOptions options_;
  const TierLayout layout_;
  const bool enabled_;
  std::unique_ptr<CacheCounters> counters_;
  std::unique_ptr<MemoryLayer> memory_;  // null without a memory layer
  std::unique_ptr<DiskCache> disk_;      // null without disk tiers
  std::vector<int> metric_callbacks_;
  bool closed_ = false;  // owner thread only
};

}  // namespace kelp::mount::cache
