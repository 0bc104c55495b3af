// Many threads reading, inserting (the same blocks too) and evicting at once, as FUSE workers
// do. Run under TSan and ASan as well (-DKELP_SANITIZE=thread|address).
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "mount/cache/cache_test_util.h"
#include "mount/cache/entry_file.h"
#include "mount/cache/tiered_cache.h"

namespace kelp::mount::cache {
namespace {

using testing::BlobBytes;
using testing::CountFiles;
using testing::DiskUsage;
using testing::MustOpen;
using testing::TempDir;
using testing::TestOptions;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kKiB = 1 << 10;

}  // namespace

TEST_CASE("concurrent readers, inserters and forgets never see wrong data and keep the bounds") {
  TempDir tmp;
  const uint64_t capacity = 4 * kMiB;  // small: constant eviction
  CacheOptions o = TestOptions(tmp.Sub("c"), capacity);
  o.memory_bytes = 512 * kKiB;
  auto cache = MustOpen(o);

  // 8 small, 8 medium, 8 large blobs; the contents are a function of (fid, offset), so every
  // hit can be checked.
  struct Blob {
    std::string fid;
    uint64_t size;
  };
  std::vector<Blob> blobs;
  for (int i = 0; i < 8; ++i) {
    blobs.push_back({"20,s" + std::to_string(i), 3000 + 1000 * static_cast<uint64_t>(i)});
    blobs.push_back({"20,m" + std::to_string(i), 600 * kKiB});
    blobs.push_back({"20,l" + std::to_string(i), 4 * kMiB});
  }
  const int kThreads = 8;
  const int kOps = 1500;
  std::atomic<uint64_t> hits{0}, wrong{0}, ops{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::string out;
      for (int i = 0; i < kOps; ++i) {
        // Half the threads hammer the same few blobs, so inserts of one block race.
        const Blob& b = blobs[t % 2 ? rng() % 3 : rng() % blobs.size()];
        size_t len = std::min<uint64_t>(b.size, 1 + rng() % (32 * kKiB));
        uint64_t off = rng() % (b.size - len + 1);
        out.assign(len, '\0');
        if (cache->Read(b.fid, b.size, off, len, out.data())) {
          hits.fetch_add(1);
          if (out != BlobBytes(b.fid, off, len)) wrong.fetch_add(1);
        } else {
          TieredCache::ByteRange r = cache->FetchRange(b.size, off, len);
          cache->Insert(b.fid, b.size, r.begin, BlobBytes(b.fid, r.begin, r.size()));
        }
        if (i % 200 == 0) cache->GetStats();  // the metrics scrape path, concurrently
        if (i % 50 == 49) cache->Forget(b.fid, b.size);  // deleted, while others read and insert it
        ops.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CacheStats s = cache->GetStats();
  INFO(s.Summary());
  CHECK(wrong.load() == 0);
  CHECK(hits.load() > ops.load() / 10);
  uint64_t evictions = 0;
  for (const TierStats& ts : s.tiers) evictions += ts.evictions;
  CHECK(evictions > 50);
  uint64_t forgotten = 0;
  for (const TierStats& ts : s.tiers) forgotten += ts.forgotten;
  CHECK(forgotten > 0);
  CHECK(DiskUsage(tmp.Sub("c")) <= capacity);
  // The index matches the directory: nothing leaked, nothing lost. Besides the entries, a
  // tier directory holds only spares (evicted files kept for reuse, with their blocks), which
  // Close removes.
  auto tier_dir = [&](int t) { return tmp.Sub("c/" + std::string(TierName(static_cast<Tier>(t)))); };
  for (int t = 0; t < kNumTiers; ++t) {
    size_t entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(tier_dir(t))) {
      uint64_t id;
      std::string name = e.path().filename().string();
      if (ParseEntryFileName(name, &id)) {
        ++entries;
      } else {
        CHECK(name.starts_with("spare-"));  // counted in DiskUsage above, blocks and all
      }
    }
    CHECK(entries == s.tiers[t].entries);
  }
  cache->Close();
  CHECK(DiskUsage(tmp.Sub("c")) <= capacity);
  for (int t = 0; t < kNumTiers; ++t) CHECK(CountFiles(tier_dir(t)) == s.tiers[t].entries);
}

}  // namespace kelp::mount::cache
