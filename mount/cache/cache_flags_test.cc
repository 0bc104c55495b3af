#include "mount/cache/cache_flags.h"

#include <catch2/catch.hpp>

namespace kelp::mount::cache {

TEST_CASE("cache flags: defaults give the documented options") {
  CacheFlags flags;
  FlagSet set("mount", "kelp mount", "");
  flags.Register(&set);
  REQUIRE(set.Parse(std::vector<std::string>{"-cacheDir=/var/cache/kelp"}).ok());
  absl::StatusOr<CacheOptions> o = flags.ToOptions(4 << 20);
  REQUIRE(o.ok());
  CHECK(o->dir == "/var/cache/kelp");
  CHECK(o->capacity_bytes == 1000ull << 20);
  CHECK(o->tier_shares_percent == std::array<uint32_t, 3>{20, 30, 50});
  CHECK(o->medium_block_size == 64 << 10);
  CHECK(o->large_block_size == 256 << 10);
  CHECK_FALSE(o->memory_bytes.has_value());
  CHECK(EffectiveMemoryBytes(*o) == 50ull << 20);
  CHECK(o->write_through);
  CHECK(o->eviction == EvictionKind::kS3Fifo);
  absl::StatusOr<TierLayout> l = TierLayout::FromOptions(*o);
  REQUIRE(l.ok());
  CHECK(l->small_max == 128 << 10);
  CHECK(l->medium_max == 2 << 20);
  CHECK(set.Usage().find("cacheTierShares") != std::string::npos);
}

TEST_CASE("cache flags: values parse, bad ones name their flag") {
  CacheFlags flags;
  FlagSet set("mount", "kelp mount", "");
  flags.Register(&set);
  REQUIRE(set.Parse(std::vector<std::string>{"-cacheCapacityMB=0", "-cacheTierThresholds=0.25,1/1",
                                             "-cacheTierShares=10,10,80", "-cacheBlockKB=128,1024",
                                             "-cacheMemoryMB=0", "-cacheWriteThrough=false",
                                             "-cacheEviction=lru"})
              .ok());
  absl::StatusOr<CacheOptions> o = flags.ToOptions(8 << 20);
  REQUIRE(o.ok());
  CHECK(o->capacity_bytes == 0);
  CHECK(o->small_tier_max == 0.25);
  CHECK(o->medium_tier_max == 1.0);
  CHECK(o->tier_shares_percent == std::array<uint32_t, 3>{10, 10, 80});
  CHECK(o->large_block_size == 1 << 20);
  CHECK(o->memory_bytes == 0u);
  CHECK_FALSE(o->write_through);
  CHECK(o->eviction == EvictionKind::kLru);

  auto error_of = [](CacheFlags f) { return std::string(f.ToOptions(4 << 20).status().message()); };
  CacheFlags bad;
  CHECK(error_of(bad).find("-cacheDir is empty") != std::string::npos);  // the mount fills it in
  bad.capacity_mb = 0;
  CHECK(bad.ToOptions(4 << 20).ok());  // off: no directory needed
  bad = CacheFlags{};
  bad.tier_shares = "20,30,40";
  CHECK(error_of(bad).find("sum to 100") != std::string::npos);
  bad = CacheFlags{};
  bad.tier_shares = "20,80";
  CHECK(error_of(bad).find("-cacheTierShares") != std::string::npos);
  bad = CacheFlags{};
  bad.tier_thresholds = "1/2,1/32";
  CHECK(error_of(bad).find("thresholds") != std::string::npos);
  bad = CacheFlags{};
  bad.block_kb = "64,300";
  CHECK(error_of(bad).find("power of two") != std::string::npos);
  bad = CacheFlags{};
  bad.eviction = "random";
  CHECK(error_of(bad).find("-cacheEviction") != std::string::npos);
}

}  // namespace kelp::mount::cache
