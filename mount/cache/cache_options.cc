#include "mount/cache/cache_options.h"

#include <algorithm>
#include <cmath>

#include "shared/strings.h"

namespace kelp::mount::cache {
namespace {

constexpr uint64_t kMinBlock = 4 << 10;
constexpr uint64_t kMaxBlock = 16 << 20;

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kSmall:
      return "small";
    case Tier::kMedium:
      return "medium";
    case Tier::kLarge:
      return "large";
  }
  return "?";
}

std::string_view EvictionName(EvictionKind kind) {
  switch (kind) {
    case EvictionKind::kS3Fifo:
      return "s3fifo";
    case EvictionKind::kLru:
      return "lru";
    case EvictionKind::kFifo:
      return "fifo";
  }
  return "?";
}

absl::StatusOr<EvictionKind> ParseEviction(std::string_view name) {
  for (EvictionKind k : {EvictionKind::kS3Fifo, EvictionKind::kLru, EvictionKind::kFifo}) {
    if (name == EvictionName(k)) return k;
  }
  return absl::InvalidArgumentError(
      kelp::StrCat("unknown cache eviction policy '", name, "' (want s3fifo, lru or fifo)"));
}

absl::Status ValidateOptions(const CacheOptions& o) {
  if (o.capacity_bytes == 0) return absl::OkStatus();  // off: nothing else matters
  if (o.chunk_size_limit < kMinBlock) {
    return absl::InvalidArgumentError(
        kelp::StrCat("cache: chunk size limit ", o.chunk_size_limit, " is below 4 KiB"));
  }
  if (!(o.small_tier_max > 0) || !(o.small_tier_max <= o.medium_tier_max) ||
      !std::isfinite(o.medium_tier_max)) {
    return absl::InvalidArgumentError(
        kelp::StrCat("cache: tier thresholds must satisfy 0 < small (", o.small_tier_max,
                     ") <= medium (", o.medium_tier_max, ")"));
  }
  if (o.small_tier_max * static_cast<double>(o.chunk_size_limit) > static_cast<double>(kMaxBlock)) {
    return absl::InvalidArgumentError(
        "cache: small blobs are cached whole, so the small tier "
        "threshold must stay at or below 16 MiB");
  }
  uint64_t sum = 0;
  for (uint32_t s : o.tier_shares_percent) sum += s;
  if (sum != 100) {
    return absl::InvalidArgumentError(
        kelp::StrCat("cache: tier shares must sum to 100 percent, not ", sum));
  }
  for (uint64_t b : {o.medium_block_size, o.large_block_size}) {
    if (!IsPowerOfTwo(b) || b < kMinBlock || b > kMaxBlock) {
      return absl::InvalidArgumentError(kelp::StrCat(
          "cache: block size ", b, " must be a power of two between 4 KiB and 16 MiB"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TierLayout> TierLayout::FromOptions(const CacheOptions& o) {
  if (absl::Status s = ValidateOptions(o); !s.ok()) return s;
  TierLayout l;
  double limit = static_cast<double>(o.chunk_size_limit);
  l.small_max = static_cast<uint64_t>(std::floor(o.small_tier_max * limit));
  l.medium_max = std::max(
      l.small_max, static_cast<uint64_t>(std::floor(std::min(o.medium_tier_max * limit, 1e18))));
  l.medium_block = o.medium_block_size;
  l.large_block = o.large_block_size;
  return l;
}

uint64_t EffectiveMemoryBytes(const CacheOptions& o) {
  if (o.capacity_bytes == 0) return 0;
  if (o.memory_bytes) return *o.memory_bytes;
  return std::min<uint64_t>(o.capacity_bytes / 20, 256ull << 20);
}

}  // namespace kelp::mount::cache
