// The mount's read cache flags and their translation into CacheOptions, so every cache knob
// has one name, one default and one help text. The mount wires them up with:
//
//   CacheFlags cache_flags;               // defaults below
//   cache_flags.Register(&flag_set);      // before parsing
//   ...parse...
//   ASSIGN_OR_RETURN(CacheOptions o, cache_flags.ToOptions(chunk_size_limit_mb << 20));
//   ASSIGN_OR_RETURN(auto cache, TieredCache::Open(std::move(o)));
//
// Thread-safety: plain values; used on the thread parsing flags.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "mount/cache/cache_options.h"
#include "shared/flags.h"

namespace kelp::mount::cache {

struct CacheFlags {
  std::string dir;                           // -cacheDir (empty: the mount picks one per mount)
  uint64_t capacity_mb = 1000;               // -cacheCapacityMB (0 = off)
  std::string tier_thresholds = "1/32,1/2";  // -cacheTierThresholds
  std::string tier_shares = "20,30,50";      // -cacheTierShares
  std::string block_kb = "64,256";           // -cacheBlockKB
  int64_t memory_mb = -1;                    // -cacheMemoryMB (-1 = auto)
  bool write_through = true;                 // -cacheWriteThrough
  std::string eviction = "s3fifo";           // -cacheEviction

  void Register(FlagSet* flags);
  // chunk_size_limit: the mount's -chunkSizeLimitMB in bytes. InvalidArgument names the flag.
  absl::StatusOr<CacheOptions> ToOptions(uint64_t chunk_size_limit) const;
};

}  // namespace kelp::mount::cache
