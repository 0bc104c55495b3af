#include "mount/cache/cache_flags.h"

#include <vector>

#include "shared/strings.h"

namespace kelp::mount::cache {
namespace {

std::vector<std::string_view> SplitComma(std::string_view s) {
  std::vector<std::string_view> out;
  while (true) {
    size_t comma = s.find(',');
    out.push_back(s.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    s.remove_prefix(comma + 1);
  }
}

// "0.5" or "1/2".
bool ParseFraction(std::string_view s, double* out) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) return ParseDouble(s, out);
  double num = 0, den = 0;
  if (!ParseDouble(s.substr(0, slash), &num) || !ParseDouble(s.substr(slash + 1), &den) ||
      den == 0) {
    return false;
  }
  *out = num / den;
  return true;
}

absl::Status FlagError(std::string_view flag, std::string_view value, std::string_view want) {
  return absl::InvalidArgumentError(kelp::StrCat("-", flag, "=", value, ": want ", want));
}

}  // namespace

void CacheFlags::Register(FlagSet* f) {
  f->Add("cacheDir", &dir,
         "directory of the on-disk read cache (one mount per directory; created if missing); "
         "empty = <$TMPDIR or /tmp>/kelp-cache-<hash of -filer, -filer.path, -dir and the user>");
  f->Add("cacheCapacityMB", &capacity_mb,
         "disk space of the read cache in MiB, as du counts it, metadata included; 0 turns the "
         "cache off");
  f->Add("cacheTierThresholds", &tier_thresholds,
         "largest small and largest medium chunk, as fractions of -chunkSizeLimitMB; small "
         "chunks are cached whole and in memory, larger ones in aligned blocks");
  f->Add("cacheTierShares", &tier_shares,
         "percent of -cacheCapacityMB guaranteed to the small, medium and large tiers (sum 100)");
  f->Add("cacheBlockKB", &block_kb,
         "cache block of medium and large chunks in KiB (powers of two, 4..16384): a miss "
         "fetches and caches the aligned block around the read");
  f->Add("cacheMemoryMB", &memory_mb,
         "RAM in MiB for hot small chunks, on top of the disk copy; -1 = min(capacity/20, 256)");
  f->Add("cacheWriteThrough", &write_through,
         "cache chunks as they are uploaded, so reading back what was written stays local");
  f->Add("cacheEviction", &eviction, "eviction policy per tier: s3fifo, lru or fifo");
}

absl::StatusOr<CacheOptions> CacheFlags::ToOptions(uint64_t chunk_size_limit) const {
  CacheOptions o;
  o.dir = dir;
  o.capacity_bytes = capacity_mb << 20;
  o.chunk_size_limit = chunk_size_limit;

  std::vector<std::string_view> th = SplitComma(tier_thresholds);
  if (th.size() != 2 || !ParseFraction(th[0], &o.small_tier_max) ||
      !ParseFraction(th[1], &o.medium_tier_max)) {
    return FlagError("cacheTierThresholds", tier_thresholds, "two fractions like 1/32,1/2");
  }
  std::vector<std::string_view> sh = SplitComma(tier_shares);
  if (sh.size() != kNumTiers) {
    return FlagError("cacheTierShares", tier_shares, "three percentages like 20,30,50");
  }
  for (int i = 0; i < kNumTiers; ++i) {
    if (!ParseInt(sh[i], &o.tier_shares_percent[i])) {
      return FlagError("cacheTierShares", tier_shares, "three percentages like 20,30,50");
    }
  }
  std::vector<std::string_view> bk = SplitComma(block_kb);
  uint64_t medium_kb = 0, large_kb = 0;
  if (bk.size() != 2 || !ParseInt(bk[0], &medium_kb) || !ParseInt(bk[1], &large_kb)) {
    return FlagError("cacheBlockKB", block_kb, "two sizes in KiB like 64,256");
  }
  o.medium_block_size = medium_kb << 10;
  o.large_block_size = large_kb << 10;
  if (memory_mb >= 0) o.memory_bytes = static_cast<uint64_t>(memory_mb) << 20;
  o.write_through = write_through;
  absl::StatusOr<EvictionKind> kind = ParseEviction(eviction);
  if (!kind.ok()) return FlagError("cacheEviction", eviction, "s3fifo, lru or fifo");
  o.eviction = *kind;
  CacheOptions check = o;  // validate even when the cache is off, so a typo is still reported
  check.capacity_bytes = 1;
  if (absl::Status s = ValidateOptions(check); !s.ok()) return s;
  // The mount fills an empty -cacheDir with a directory of its own (DefaultCacheDir).
  if (dir.empty() && capacity_mb > 0) {
    return absl::InvalidArgumentError(
        "-cacheDir is empty: name a directory, or -cacheCapacityMB=0");
  }
  return o;
}

}  // namespace kelp::mount::cache
