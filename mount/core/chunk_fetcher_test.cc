#include "mount/core/chunk_fetcher.h"

#include <catch2/catch.hpp>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "mount/cache/tiered_cache.h"
#include "mount/testing/fake_blob_store.h"
#include "shared/thread_pool.h"

namespace kelp::mount {
namespace {

TEST_CASE("random reads fill the tiered cache, a second pass does not go to the volume servers") {
  char tmpl[] = "/tmp/kelp-fetcher-test.XXXXXX";
  std::string dir = mkdtemp(tmpl);
  {
    cache::CacheOptions o;
    o.dir = dir;
    o.capacity_bytes = 64 << 20;
    o.chunk_size_limit = 4 << 20;
    auto c = cache::TieredCache::Open(o);
    REQUIRE(c.ok());
    FakeBlobStore blobs;
    std::string blob(4 << 20, '\0');
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 7 + i / 4096);
    auto fid = blobs.Put(blob, false);
    REQUIRE(fid.ok());
    ChunkFetcher f(&blobs, c->get(), nullptr, ChunkFetcher::Options{});
    std::string out(16384, '\0');
    for (uint64_t off : {100000ull, 2000000ull, 3500000ull}) {
      REQUIRE(f.Read(*fid, blob.size(), off, out.size(), out.data(), false).ok());
      REQUIRE(out == blob.substr(off, out.size()));
    }
    size_t gets = blobs.gets();
    for (uint64_t off : {100000ull, 2000000ull, 3500000ull}) {
      REQUIRE(f.Read(*fid, blob.size(), off, out.size(), out.data(), false).ok());
      REQUIRE(out == blob.substr(off, out.size()));
    }
    REQUIRE(blobs.gets() == gets);  // all from the cache
    (*c)->Close();
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a random-read miss waits only for its own bytes, and the cache blocks follow in the background") {
  char tmpl[] = "/tmp/kelp-fetcher-test.XXXXXX";
  std::string dir = mkdtemp(tmpl);
  {
    cache::CacheOptions o;
    o.dir = dir;
    o.capacity_bytes = 64 << 20;
    o.chunk_size_limit = 4 << 20;
    auto c = cache::TieredCache::Open(o);
    REQUIRE(c.ok());
    FakeBlobStore blobs;
    std::string blob(4 << 20, '\0');
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 13 + i / 1000);
    auto fid = blobs.Put(blob, false);
    REQUIRE(fid.ok());
    ThreadPool pool("test-fill", 2, 8);
    ChunkFetcher f(&blobs, c->get(), &pool, ChunkFetcher::Options{});
    uint64_t block = (*c)->BlockSize(blob.size());
    REQUIRE(block > 4096);
    std::string out(4096, '\0');
    const uint64_t off = 3 * block + 1000;
    REQUIRE(f.Read(*fid, blob.size(), off, out.size(), out.data(), false).ok());
    REQUIRE(out == blob.substr(off, out.size()));
    // The reader's own GET (the first) was its 4 KiB, not a block.
    REQUIRE(blobs.get_lengths().size() >= 1);
    CHECK(blobs.get_lengths()[0] == 4096);
    // Once the fill landed, the block is served from the cache.
    std::string whole(block, '\0');
    bool cached = false;
    for (int i = 0; i < 500 && !cached; ++i) {
      cached = (*c)->Read(*fid, blob.size(), 3 * block, block, whole.data());
      if (!cached) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(cached);
    size_t gets = blobs.gets();
    REQUIRE(f.Read(*fid, blob.size(), 3 * block + 7, out.size(), out.data(), false).ok());
    REQUIRE(out == blob.substr(3 * block + 7, out.size()));
    CHECK(blobs.gets() == gets);
    (*c)->Close();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kelp::mount
