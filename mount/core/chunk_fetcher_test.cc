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

// The tiered cache of a CachedBlob, reported full: every fill would push another block out.
class FullCache : public ChunkCache {
 public:
  explicit FullCache(ChunkCache* c) : c_(c) {}
  bool Read(std::string_view fid, uint64_t blob_size, uint64_t offset, size_t len,
            char* dst) override {
    return c_->Read(fid, blob_size, offset, len, dst);
  }
  size_t Insert(std::string_view fid, uint64_t blob_size, uint64_t offset,
                std::string_view data) override {
    return c_->Insert(fid, blob_size, offset, data);
  }
  uint64_t BlockSize(uint64_t blob_size) const override { return c_->BlockSize(blob_size); }
  void Forget(std::string_view fid, uint64_t blob_size) override { c_->Forget(fid, blob_size); }
  bool HasRoom(uint64_t) const override { return false; }

 private:
  ChunkCache* const c_;
};

TEST_CASE("read-ahead windows load into buffers that windows gone before gave back") {
  FakeBlobStore blobs;
  ChunkFetcher::Options o;
  o.window = 4096;
  o.max_windows = 2;
  ChunkFetcher f(&blobs, nullptr, nullptr, o);
  // Two blobs of ten whole windows and a short one, each byte different from the other blob's.
  for (int seed : {3, 5}) {
    std::string blob(10 * 4096 + 500, '\0');
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * seed + i / 4096);
    auto fid = blobs.Put(blob, false);
    REQUIRE(fid.ok());
    std::string got(blob.size(), 'x');
    for (size_t off = 0; off < blob.size(); off += 1000) {
      size_t n = std::min<size_t>(1000, blob.size() - off);
      REQUIRE(f.Read(*fid, blob.size(), off, n, got.data() + off, true).ok());
    }
    CHECK(got == blob);  // a reused buffer holds only the new window's bytes
    CHECK(f.kept_window_buffers() > 0);
    CHECK(f.kept_window_buffers() <= 4);
  }
}

TEST_CASE("past a full cache one miss in full_fill_every fetches its block") {
  CachedBlob t(17);
  FullCache full(t.cache.get());
  ChunkFetcher::Options o;
  o.full_fill_every = 4;
  // No pool: a miss that fills fetches the block itself, so the GETs are in order.
  ChunkFetcher f(&t.blobs, &full, nullptr, o);
  const uint64_t block = t.cache->BlockSize(t.blob.size());
  std::string out(4096, '\0');
  for (uint64_t b = 0; b < 8; ++b) {
    const uint64_t off = b * block + 100;
    REQUIRE(f.Read(t.fid, t.blob.size(), off, out.size(), out.data(), false).ok());
    REQUIRE(out == t.blob.substr(off, out.size()));
  }
  std::vector<uint64_t> lengths = t.blobs.get_lengths();
  REQUIRE(lengths.size() == 8);
  for (size_t i = 0; i < lengths.size(); ++i) {
    CAPTURE(i);
    CHECK(lengths[i] == (i % 4 == 0 ? block : 4096));
  }
  // The two blocks fetched are cached: reading them again goes nowhere.
  for (uint64_t b : {0ull, 4ull}) {
    REQUIRE(f.Read(t.fid, t.blob.size(), b * block + 5000, out.size(), out.data(), false).ok());
    REQUIRE(out == t.blob.substr(b * block + 5000, out.size()));
  }
  CHECK(t.blobs.gets() == 8);
}

// Reads the whole blob sequentially in 64 KiB reads (read-ahead windows, no pool: each window
// is loaded by the read that needs it) and checks the bytes.
void ReadSequentially(ChunkFetcher& f, const CachedBlob& t) {
  std::string got(t.blob.size(), 'x');
  for (size_t off = 0; off < t.blob.size(); off += 65536) {
    REQUIRE(f.Read(t.fid, t.blob.size(), off, 65536, got.data() + off, true).ok());
  }
  REQUIRE(got == t.blob);
}

TEST_CASE("past a full cache one read-ahead window in full_fill_every goes into the cache") {
  // A file read back in the order it was written, a little larger than the cache: every
  // window inserted pushed out the blocks the reader needed next, and the whole file came
  // from the volume servers.
  CachedBlob t(23);
  FullCache full(t.cache.get());
  const uint64_t block = t.cache->BlockSize(t.blob.size());
  ChunkFetcher::Options o;
  o.window = 2 * block;
  o.full_fill_every = 4;
  ChunkFetcher f(&t.blobs, &full, nullptr, o);
  ReadSequentially(f, t);
  const uint64_t windows = t.blob.size() / o.window;
  REQUIRE(windows >= 8);
  CHECK(t.blobs.gets() == windows);
  std::string out(4096, '\0');
  for (uint64_t w = 0; w < windows; ++w) {
    CAPTURE(w);
    bool cached = t.cache->Read(t.fid, t.blob.size(), w * o.window + 100, out.size(), out.data());
    CHECK(cached == (w % 4 == 0));
    if (cached) CHECK(out == t.blob.substr(w * o.window + 100, out.size()));
  }
}

TEST_CASE("with room in the cache every read-ahead window goes into it") {
  CachedBlob t(29);
  ChunkFetcher::Options o;
  o.window = 2 * t.cache->BlockSize(t.blob.size());
  ChunkFetcher f(&t.blobs, t.cache.get(), nullptr, o);
  ReadSequentially(f, t);
  const size_t gets = t.blobs.gets();
  CHECK(gets == t.blob.size() / o.window);
  ChunkFetcher again(&t.blobs, t.cache.get(), nullptr, o);  // no windows in memory
  ReadSequentially(again, t);
  CHECK(t.blobs.gets() == gets);  // all from the cache
}

TEST_CASE(
    "a blob a window reads whole from a local volume is neither written through nor kept after a "
    "window read") {
  CachedBlob t(31);
  t.blobs.reads_locally = true;
  ChunkFetcher::Options o;  // the window is the whole 4 MiB blob
  REQUIRE(o.window == t.blob.size());
  ChunkFetcher f(&t.blobs, t.cache.get(), nullptr, o);
  REQUIRE(t.cache->write_through());
  std::string out(4096, '\0');
  f.OnUploaded(t.fid, t.blob);
  CHECK_FALSE(t.cache->Read(t.fid, t.blob.size(), 100, out.size(), out.data()));
  ReadSequentially(f, t);
  CHECK(t.blobs.gets() == 1);
  CHECK_FALSE(t.cache->Read(t.fid, t.blob.size(), 100, out.size(), out.data()));

  // A small blob (random reads' material) and one no window reads whole go in as before.
  std::string small = t.blob.substr(0, o.window / 4);
  auto small_fid = t.blobs.Put(small, false);
  REQUIRE(small_fid.ok());
  f.OnUploaded(*small_fid, small);
  REQUIRE(t.cache->Read(*small_fid, small.size(), 100, out.size(), out.data()));
  CHECK(out == small.substr(100, out.size()));
  ChunkFetcher::Options half = o;
  half.window = o.window / 2;
  ChunkFetcher g(&t.blobs, t.cache.get(), nullptr, half);
  g.OnUploaded(t.fid, t.blob);
  REQUIRE(t.cache->Read(t.fid, t.blob.size(), 100, out.size(), out.data()));
  CHECK(out == t.blob.substr(100, out.size()));
}

TEST_CASE("a blob a window reads whole goes into the cache when its volume is not local") {
  CachedBlob t(37);
  ChunkFetcher f(&t.blobs, t.cache.get(), nullptr, ChunkFetcher::Options{});
  std::string out(4096, '\0');
  f.OnUploaded(t.fid, t.blob);
  REQUIRE(t.cache->Read(t.fid, t.blob.size(), 100, out.size(), out.data()));
  CHECK(out == t.blob.substr(100, out.size()));
}

TEST_CASE("with room in the cache every miss fetches its block") {
  CachedBlob t(19);
  ChunkFetcher f(&t.blobs, t.cache.get(), nullptr, ChunkFetcher::Options{});
  const uint64_t block = t.cache->BlockSize(t.blob.size());
  std::string out(4096, '\0');
  for (uint64_t b = 0; b < 6; ++b) {
    REQUIRE(f.Read(t.fid, t.blob.size(), b * block + 100, out.size(), out.data(), false).ok());
  }
  for (uint64_t len : t.blobs.get_lengths()) CHECK(len == block);
  CHECK(t.blobs.gets() == 6);
}

}  // namespace
}  // namespace kelp::mount
