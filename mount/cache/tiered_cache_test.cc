// TieredCache behaviour a mount relies on: tiers, blocks, memory layer, shares, stats.
// Disk failure, corruption and restart cases are in tiered_cache_disk_test.cc.
#include "mount/cache/tiered_cache.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "mount/cache/cache_test_util.h"

namespace kelp::mount::cache {
namespace {

using testing::BlobBytes;
using testing::CountFiles;
using testing::MustOpen;
using testing::ReadThrough;
using testing::TempDir;
using testing::TestOptions;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kKiB = 1 << 10;

}  // namespace

TEST_CASE("capacity 0 turns the cache off and creates nothing") {
  TempDir tmp;
  std::string dir = tmp.Sub("cache");
  auto cache = MustOpen(TestOptions(dir, 0));
  CHECK_FALSE(cache->enabled());
  std::string blob = BlobBytes("1,ab", 0, 4096);
  CHECK(cache->Insert("1,ab", 4096, 0, blob) == 0);
  std::string out(100, '\0');
  CHECK_FALSE(cache->Read("1,ab", 4096, 0, 100, out.data()));
  // Off means no read amplification either: fetch exactly what was asked.
  auto r = cache->FetchRange(4 * kMiB, 300000, 16384);
  CHECK(r.begin == 300000);
  CHECK(r.end == 316384);
  cache->Close();
  CHECK_FALSE(std::filesystem::exists(dir));
  CHECK(cache->GetStats().Summary() == "cache: off");
}

TEST_CASE("invalid options are refused") {
  TempDir tmp;
  CacheOptions o = TestOptions(tmp.path(), 10 * kMiB);
  o.tier_shares_percent = {20, 30, 40};
  CHECK(absl::IsInvalidArgument(TieredCache::Open(o).status()));
  o = TestOptions(tmp.path(), 10 * kMiB);
  o.large_block_size = 100000;
  CHECK(absl::IsInvalidArgument(TieredCache::Open(o).status()));
}

TEST_CASE("blobs go to tiers by their size, in that tier's blocks") {
  TempDir tmp;
  CacheOptions o = TestOptions(tmp.path(), 64 * kMiB);
  o.memory_bytes = 0;
  auto cache = MustOpen(o);
  struct Case {
    std::string fid;
    uint64_t size;
    Tier tier;
    uint64_t block;
    size_t blocks;
  };
  std::vector<Case> cases = {
      {"1,01", 1000, Tier::kSmall, 1000, 1},
      {"1,02", 128 * kKiB, Tier::kSmall, 128 * kKiB, 1},
      {"1,03", 128 * kKiB + 1, Tier::kMedium, 64 * kKiB, 3},
      {"1,04", 2 * kMiB, Tier::kMedium, 64 * kKiB, 32},
      {"1,05", 2 * kMiB + 1, Tier::kLarge, 256 * kKiB, 9},
      {"1,06", 4 * kMiB, Tier::kLarge, 256 * kKiB, 16},
  };
  std::array<size_t, kNumTiers> expected_entries = {0, 0, 0};
  for (const Case& c : cases) {
    INFO(c.fid);
    CHECK(cache->TierOf(c.size) == c.tier);
    CHECK(cache->BlockSize(c.size) == c.block);
    CHECK(cache->Insert(c.fid, c.size, 0, BlobBytes(c.fid, 0, c.size)) == c.blocks);
    expected_entries[TierIndex(c.tier)] += c.blocks;
  }
  CacheStats s = cache->GetStats();
  for (int t = 0; t < kNumTiers; ++t) {
    INFO(TierName(static_cast<Tier>(t)));
    CHECK(s.tiers[t].entries == expected_entries[t]);
    CHECK(s.tiers[t].inserts == expected_entries[t]);
    CHECK(CountFiles(tmp.Sub(std::string(TierName(static_cast<Tier>(t))))) == expected_entries[t]);
  }
  std::string out;
  for (const Case& c : cases) {
    CHECK(ReadThrough(*cache, c.fid, c.size, c.size / 3, static_cast<size_t>(c.size / 2), &out));
    CHECK(out == BlobBytes(c.fid, c.size / 3, c.size / 2));
  }
}

TEST_CASE("FetchRange covers a read with whole aligned blocks") {
  TempDir tmp;
  auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
  auto r = cache->FetchRange(4 * kMiB, 300000, 16384);
  CHECK((r.begin == 256 * kKiB && r.end == 512 * kKiB));
  r = cache->FetchRange(4 * kMiB, 512 * kKiB - 8, 16);  // straddles two blocks
  CHECK((r.begin == 256 * kKiB && r.end == 768 * kKiB));
  r = cache->FetchRange(1000000, 999990, 10);  // medium tail block is short
  CHECK((r.begin == 983040 && r.end == 1000000));
  r = cache->FetchRange(5000, 1000, 10);  // small: the whole blob
  CHECK((r.begin == 0 && r.end == 5000));
}

TEST_CASE("16 KiB random reads of large chunks warm the cache") {
  TempDir tmp;
  auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
  std::vector<std::string> fids = {"2,a1", "2,a2", "2,a3", "2,a4"};
  const uint64_t size = 4 * kMiB;
  std::mt19937_64 rng(7);
  std::string out;
  size_t first_pass_hits = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string& fid = fids[rng() % fids.size()];
    uint64_t off = (rng() % (size / (16 * kKiB))) * 16 * kKiB;
    first_pass_hits += ReadThrough(*cache, fid, size, off, 16 * kKiB, &out);
    REQUIRE(out == BlobBytes(fid, off, 16 * kKiB));
  }
  // 64 distinct 256 KiB blocks: at most 64 misses, everything else hit.
  CHECK(first_pass_hits >= 2000 - 64);
  for (const std::string& fid : fids) {
    for (uint64_t off = 0; off < size; off += 16 * kKiB) {
      REQUIRE(ReadThrough(*cache, fid, size, off, 16 * kKiB, &out));
      REQUIRE(out == BlobBytes(fid, off, 16 * kKiB));
    }
  }
  CacheStats s = cache->GetStats();
  CHECK(s.tiers[2].entries == 64);
  CHECK(s.tiers[2].misses <= 64);
}

TEST_CASE("HasRoom says whether blocks fit with nothing evicted") {
  TempDir tmp;
  auto cache = MustOpen(TestOptions(tmp.path(), 4 * kMiB));
  const uint64_t size = 4 * kMiB, block = 256 * kKiB;
  REQUIRE(cache->HasRoom(block));
  // Blocks of four blobs: 64 blocks are four times what 4 MiB holds.
  size_t inserted = 0;
  for (const char* fid : {"3,b1", "3,b2", "3,b3", "3,b4"}) {
    for (uint64_t off = 0; off < size && cache->HasRoom(block); off += block) {
      REQUIRE(cache->Insert(fid, size, off, BlobBytes(fid, off, block)) == 1);
      ++inserted;
    }
  }
  CHECK_FALSE(cache->HasRoom(block));
  // 4 MiB holds 15 such entries (each a page more than its block); HasRoom keeps a sixteenth of
  // the budget free.
  CHECK(inserted >= 8);
  CHECK(inserted < 15);
  // Nothing was evicted on the way: every block inserted is still there.
  CHECK(cache->GetStats().tiers[2].entries == inserted);
}

TEST_CASE("Insert stores the whole blocks inside the data and nothing else") {
  TempDir tmp;
  auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
  const uint64_t size = 4 * kMiB;
  CHECK(cache->Insert("3,b", size, 100, BlobBytes("3,b", 100, 600000)) == 1);  // [256K, 512K)
  std::string out(4096, '\0');
  CHECK(cache->Read("3,b", size, 256 * kKiB, 4096, out.data()));
  CHECK_FALSE(cache->Read("3,b", size, 0, 4096, out.data()));
  CHECK_FALSE(cache->Read("3,b", size, 512 * kKiB, 4096, out.data()));
  // A read spanning a cached and an uncached block misses as a whole.
  CHECK_FALSE(cache->Read("3,b", size, 512 * kKiB - 10, 20, out.data()));
  // Inserting again is harmless and stores nothing new.
  CHECK(cache->Insert("3,b", size, 256 * kKiB, BlobBytes("3,b", 256 * kKiB, 256 * kKiB)) == 0);
  CHECK(cache->GetStats().tiers[2].entries == 1);
  // Reads past the blob are misses, not crashes.
  CHECK_FALSE(cache->Read("3,b", size, size - 10, 20, out.data()));
}

TEST_CASE("small blobs are kept in memory, and promoted there from disk") {
  TempDir tmp;
  std::string blob = BlobBytes("4,s", 0, 3000);
  {
    auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
    REQUIRE(cache->Insert("4,s", 3000, 0, blob) == 1);
    std::string out(1000, '\0');
    REQUIRE(cache->Read("4,s", 3000, 1000, 1000, out.data()));
    CHECK(out == blob.substr(1000, 1000));
    CHECK(cache->GetStats().tiers[0].memory_hits == 1);
  }
  auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));  // memory is cold again
  std::string out(10, '\0');
  REQUIRE(cache->Read("4,s", 3000, 0, 10, out.data()));
  CHECK(cache->GetStats().tiers[0].memory_hits == 0);
  REQUIRE(cache->Read("4,s", 3000, 2990, 10, out.data()));
  CHECK(out == blob.substr(2990));
  CHECK(cache->GetStats().tiers[0].memory_hits == 1);
  CHECK(cache->GetStats().memory_entries == 1);
}

TEST_CASE("without a directory the cache runs in memory only") {
  auto cache = MustOpen(TestOptions("", 64 * kMiB));
  std::string blob = BlobBytes("5,m", 0, 5000);
  REQUIRE(cache->Insert("5,m", 5000, 0, blob) == 1);
  CHECK(cache->Insert("6,l", 4 * kMiB, 0, BlobBytes("6,l", 0, 256 * kKiB)) == 0);
  std::string out(5000, '\0');
  CHECK(cache->Read("5,m", 5000, 0, 5000, out.data()));
  CHECK(out == blob);
  CHECK_FALSE(cache->GetStats().disk_enabled);
}

TEST_CASE("a stream of large chunks does not evict the small tier's share") {
  TempDir tmp;
  auto run = [&](std::array<uint32_t, kNumTiers> shares) {
    std::filesystem::remove_all(tmp.Sub("c"));
    CacheOptions o = TestOptions(tmp.Sub("c"), 8 * kMiB);
    o.memory_bytes = 0;  // count the disk only
    o.tier_shares_percent = shares;
    auto cache = MustOpen(o);
    std::string out;
    for (int i = 0; i < 80; ++i) {  // 80 x 12 KiB on disk: under 20% of 8 MiB
      std::string fid = "7," + std::to_string(i);
      ReadThrough(*cache, fid, 8000, 0, 8000, &out);
    }
    for (int i = 0; i < 200; ++i) {  // 50 MiB of large chunks, read once each
      std::string fid = "8," + std::to_string(i);
      ReadThrough(*cache, fid, 4 * kMiB, 0, 256 * kKiB, &out);
    }
    CHECK(cache->GetStats().tiers[2].evictions > 150);
    int hits = 0;
    for (int i = 0; i < 80; ++i) {
      std::string fid = "7," + std::to_string(i);
      hits += ReadThrough(*cache, fid, 8000, 0, 8000, &out);
    }
    return hits;
  };
  CHECK(run({20, 30, 50}) == 80);
  // The same stream with (almost) no small share flushes the small entries out.
  CHECK(run({1, 1, 98}) < 10);
}

TEST_CASE("hits, misses and bytes are exported as kelp_cache_* metrics") {
  TempDir tmp;
  MetricsRegistry registry;
  CacheOptions o = TestOptions(tmp.path(), 64 * kMiB);
  o.metrics = &registry;
  auto cache = MustOpen(o);
  std::string out;
  ReadThrough(*cache, "9,x", 4 * kMiB, 0, 16384, &out);
  ReadThrough(*cache, "9,x", 4 * kMiB, 16384, 16384, &out);
  ReadThrough(*cache, "9,y", 1000, 0, 1000, &out);
  std::string text = registry.Render();
  CHECK(text.find("kelp_cache_hits_total{tier=\"large\"} 1") != std::string::npos);
  CHECK(text.find("kelp_cache_misses_total{tier=\"large\"} 1") != std::string::npos);
  CHECK(text.find("kelp_cache_hit_bytes_total{tier=\"large\"} 16384") != std::string::npos);
  CHECK(text.find("kelp_cache_misses_total{tier=\"small\"} 1") != std::string::npos);
  CHECK(text.find("kelp_cache_entries{tier=\"large\"} 1") != std::string::npos);
  CHECK(text.find("kelp_cache_inserts_total{tier=\"small\"} 1") != std::string::npos);
  CacheStats s = cache->GetStats();
  CHECK(s.hits() == 1);
  CHECK(s.misses() == 2);
  CHECK(s.Summary().find("large hits=1 misses=1") != std::string::npos);
  cache.reset();
  CHECK(registry.Render().find("kelp_cache_entries{") == std::string::npos);  // callbacks gone
}

}  // namespace kelp::mount::cache

namespace kelp::mount::cache {

TEST_CASE("walking through a block sequentially does not count as reuse") {
  for (bool sequential : {true, false}) {
    INFO((sequential ? "sequential" : "random"));
    TempDir tmp;
    CacheOptions o = TestOptions(tmp.path(), 700 * kKiB);  // room for two 256 KiB blocks
    o.memory_bytes = 0;
    o.eviction = EvictionKind::kLru;
    auto cache = MustOpen(o);
    for (const char* fid : {"21,a", "21,b"}) {
      REQUIRE(cache->Insert(fid, 4 * kMiB, 0, BlobBytes(fid, 0, 256 * kKiB)) == 1);
    }
    std::string out(16 * kKiB, '\0');
    if (sequential) {  // as after read-ahead: the reader starts at the block and walks on
      REQUIRE(cache->Read("21,a", 4 * kMiB, 0, 16 * kKiB, out.data()));
      REQUIRE(cache->Read("21,a", 4 * kMiB, 16 * kKiB, 16 * kKiB, out.data()));
    } else {
      REQUIRE(cache->Read("21,a", 4 * kMiB, 100 * kKiB, 16 * kKiB, out.data()));
    }
    REQUIRE(cache->Insert("21,c", 4 * kMiB, 0, BlobBytes("21,c", 0, 256 * kKiB)) == 1);
    CHECK(cache->GetStats().tiers[2].evictions == 1);
    CHECK(cache->Read("21,a", 4 * kMiB, 0, 16, out.data()) == !sequential);
    CHECK(cache->Read("21,b", 4 * kMiB, 0, 16, out.data()) == sequential);
  }
}

TEST_CASE("a deleted blob's blocks leave memory and disk, and their room goes to live data") {
  TempDir tmp;
  // Dead and live blobs fill 10.3 of 12 MiB: one more 4 MiB blob fits only if the dead go.
  auto cache = MustOpen(TestOptions(tmp.path(), 12 * kMiB));
  struct Blob {
    std::string fid;
    uint64_t size;
    size_t blocks;
  };
  std::vector<Blob> dead = {{"9,1", 3000, 1}, {"9,2", 1 * kMiB, 16}, {"9,3", 4 * kMiB, 16}};
  std::vector<Blob> live = {{"9,4", 3000, 1}, {"9,5", 1 * kMiB, 16}, {"9,6", 4 * kMiB, 16}};
  for (const auto& set : {dead, live}) {
    for (const Blob& b : set) REQUIRE(cache->Insert(b.fid, b.size, 0, BlobBytes(b.fid, 0, b.size)) == b.blocks);
  }
  const CacheStats before = cache->GetStats();
  REQUIRE(before.memory_entries == 2);
  for (const Blob& b : dead) cache->Forget(b.fid, b.size);
  cache->Forget("9,7", 4 * kMiB);  // never cached: nothing happens
  const CacheStats after = cache->GetStats();
  CHECK(after.memory_entries == 1);
  std::string out;
  for (int t = 0; t < kNumTiers; ++t) {
    INFO(TierName(static_cast<Tier>(t)));
    CHECK(after.tiers[t].forgotten == dead[t].blocks);
    CHECK(after.tiers[t].entries == before.tiers[t].entries - dead[t].blocks);
    CHECK(after.tiers[t].bytes < before.tiers[t].bytes);
    out.assign(dead[t].size, '\0');
    CHECK_FALSE(cache->Read(dead[t].fid, dead[t].size, 0, dead[t].size, out.data()));
    out.assign(live[t].size, '\0');
    REQUIRE(cache->Read(live[t].fid, live[t].size, 0, live[t].size, out.data()));
    CHECK(out == BlobBytes(live[t].fid, 0, live[t].size));
  }
  // The freed room takes a new blob without evicting anything.
  REQUIRE(cache->Insert("9,8", 4 * kMiB, 0, BlobBytes("9,8", 0, 4 * kMiB)) == 16);
  for (const TierStats& t : cache->GetStats().tiers) CHECK(t.evictions == 0);
}

}  // namespace kelp::mount::cache
