#include "mount/core/chunk_fetcher.h"

#include <catch2/catch.hpp>
#include <stdlib.h>

#include <filesystem>

#include "mount/cache/tiered_cache.h"
#include "mount/testing/fake_blob_store.h"

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

}  // namespace
}  // namespace kelp::mount
