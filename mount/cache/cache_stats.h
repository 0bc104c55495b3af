// Counters of the read cache: per-instance totals for GetStats() (the unmount summary line)
// mirrored into a MetricsRegistry as kelp_cache_* (readable on the mount's /metrics while
// mounted). Names and labels are listed in docs/cache.md.
//
// Thread-safety: CacheCounters is lock-free; every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "mount/cache/cache_options.h"
#include "shared/metrics.h"

namespace kelp::mount::cache {

struct TierStats {
  uint64_t hits = 0;         // block lookups served (memory or disk)
  uint64_t memory_hits = 0;  // of which from the memory layer (small tier only)
  uint64_t misses = 0;
  uint64_t hit_bytes = 0;   // bytes copied out on hits
  uint64_t miss_bytes = 0;  // bytes asked for on misses
  uint64_t inserts = 0;     // blocks written to disk
  uint64_t insert_bytes = 0;
  uint64_t evictions = 0;  // disk entries evicted to make room
  uint64_t forgotten = 0;  // disk entries dropped because their blob was deleted
  uint64_t checksum_failures = 0;
  uint64_t entries = 0;      // disk entries now
  uint64_t bytes = 0;        // disk bytes now (allocated blocks, as du counts them)
  uint64_t share_bytes = 0;  // guaranteed share of the disk capacity
};

struct CacheStats {
  bool enabled = false;       // capacity > 0
  bool disk_enabled = false;  // the directory is usable
  std::array<TierStats, kNumTiers> tiers;
  uint64_t memory_entries = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_capacity = 0;
  uint64_t disk_capacity = 0;
  uint64_t disk_meta_bytes = 0;  // directories, KELPCACHE, LOCK, index
  uint64_t disk_spare_bytes =
      0;                         // evicted entries' files kept, blocks and all, for the next writes
  uint64_t disk_errors = 0;      // failed writes/reads/deletes (each one degraded to a miss)
  uint64_t files_reused = 0;     // entries written over an evicted entry's file (a spare)

  uint64_t hits() const;
  uint64_t misses() const;
  double HitRatio() const;  // hits / (hits + misses); 0 when idle
  // "cache: hits 120 (96.0%) misses 5 | small h=.. m=.. 3.1MiB/200MiB ev=0 | ... | errors 0"
  std::string Summary() const;
};

class CacheCounters {
 public:
  explicit CacheCounters(MetricsRegistry* registry);  // registry may be nullptr

  void Hit(Tier tier, uint64_t bytes, bool memory);
  void Miss(Tier tier, uint64_t bytes);
  void Inserted(Tier tier, uint64_t bytes);
  void Evicted(Tier tier);
  void Forgotten(Tier tier);
  void ChecksumFailure(Tier tier);
  void DiskError();
  void FileReused();

  // Adds the counters (not the gauges) into *stats.
  void Fill(CacheStats* stats) const;

 private:
  struct Pair {  // an instance total and its registry counter (may be null)
    std::atomic<uint64_t> value{0};
    Counter* metric = nullptr;
    void Inc(uint64_t n) {
      value.fetch_add(n, std::memory_order_relaxed);
      if (metric) metric->Inc(n);
    }
    uint64_t get() const { return value.load(std::memory_order_relaxed); }
  };
  struct PerTier {
    Pair hits, memory_hits, misses, hit_bytes, miss_bytes, inserts, insert_bytes, evictions,
        forgotten, checksum_failures;
  };
  std::array<PerTier, kNumTiers> tiers_;
  Pair disk_errors_;
  Pair files_reused_;
};

}  // namespace kelp::mount::cache
