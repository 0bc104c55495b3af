#include "mount/core/chunk_fetcher.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include "mount/cache/tiered_cache.h"
#include "mount/testing/fake_blob_store.h"
#include "mount/testing/test_cache.h"
#include "shared/testing/temp_dir.h"
#include "shared/thread_pool.h"

namespace kelp::mount {
namespace {

// A tiered cache in a temp dir and one 4 MiB blob of a known pattern in a FakeBlobStore.
struct CachedBlob {
  kelp::testing::TempDir dir{"kelp-fetcher-test"};
  std::unique_ptr<cache::TieredCache> cache;
  FakeBlobStore blobs;
  std::string blob = std::string(4 << 20, '\0');
  std::string fid;

  explicit CachedBlob(int seed) {
    auto c = cache::TieredCache::Open(TestCacheOptions(dir.path()));
    REQUIRE(c.ok());
    cache = std::move(*c);
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * seed + i / 1000);
    auto f = blobs.Put(blob, false);
    REQUIRE(f.ok());
    fid = *f;
  }
  ~CachedBlob() { cache->Close(); }
};

TEST_CASE("random reads fill the tiered cache, a second pass does not go to the volume servers") {
  CachedBlob t(7);
  ChunkFetcher f(&t.blobs, t.cache.get(), nullptr, ChunkFetcher::Options{});
  std::string out(16384, '\0');
  for (uint64_t off : {100000ull, 2000000ull, 3500000ull}) {
    REQUIRE(f.Read(t.fid, t.blob.size(), off, out.size(), out.data(), false).ok());
    REQUIRE(out == t.blob.substr(off, out.size()));
  }
  size_t gets = t.blobs.gets();
  for (uint64_t off : {100000ull, 2000000ull, 3500000ull}) {
    REQUIRE(f.Read(t.fid, t.blob.size(), off, out.size(), out.data(), false).ok());
    REQUIRE(out == t.blob.substr(off, out.size()));
  }
  REQUIRE(t.blobs.gets() == gets);  // all from the cache
}

TEST_CASE("a random-read miss waits only for its own bytes, and the cache blocks follow in the background") {
  CachedBlob t(13);
  ThreadPool pool("test-fill", 2, 8);
  ChunkFetcher f(&t.blobs, t.cache.get(), &pool, ChunkFetcher::Options{});
  uint64_t block = t.cache->BlockSize(t.blob.size());
  REQUIRE(block > 4096);
  std::string out(4096, '\0');
  const uint64_t off = 3 * block + 1000;
  REQUIRE(f.Read(t.fid, t.blob.size(), off, out.size(), out.data(), false).ok());
  REQUIRE(out == t.blob.substr(off, out.size()));
  // The reader's own GET (the first) was its 4 KiB, not a block.
  REQUIRE(t.blobs.get_lengths().size() >= 1);
  CHECK(t.blobs.get_lengths()[0] == 4096);
  // Once the fill landed, the block is served from the cache.
  std::string whole(block, '\0');
  bool cached = false;
  for (int i = 0; i < 500 && !cached; ++i) {
    cached = t.cache->Read(t.fid, t.blob.size(), 3 * block, block, whole.data());
    if (!cached) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(cached);
  size_t gets = t.blobs.gets();
  REQUIRE(f.Read(t.fid, t.blob.size(), 3 * block + 7, out.size(), out.data(), false).ok());
  REQUIRE(out == t.blob.substr(3 * block + 7, out.size()));
  CHECK(t.blobs.gets() == gets);
}

}  // namespace
}  // namespace kelp::mount
