// The cache's disk under stress and in trouble: capacity as du measures it, corruption,
// restarts, foreign or damaged directories, full and read-only filesystems.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "mount/cache/cache_format.h"
#include "mount/cache/cache_test_util.h"
#include "mount/cache/entry_file.h"
#include "mount/cache/tiered_cache.h"

namespace kelp::mount::cache {
namespace {

using testing::BlobBytes;
using testing::CountFiles;
using testing::DiskUsage;
using testing::MustOpen;
using testing::ReadThrough;
using testing::TempDir;
using testing::TestOptions;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kKiB = 1 << 10;

// Disk tiers only: every read that misses goes to the entry files.
CacheOptions DiskOnlyOptions(const std::string& dir, uint64_t capacity) {
  CacheOptions o = TestOptions(dir, capacity);
  o.memory_bytes = 0;
  return o;
}

struct Blob {
  std::string fid;
  uint64_t size;
};

// A mix of small, medium and large blobs.
std::vector<Blob> MixedBlobs(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Blob> blobs;
  for (int i = 0; i < n; ++i) {
    uint64_t size;
    switch (i % 3) {
      case 0:
        size = 1 + rng() % (128 * kKiB);
        break;
      case 1:
        size = 128 * kKiB + 1 + rng() % (2 * kMiB - 128 * kKiB);
        break;
      default:
        size = 4 * kMiB;
        break;
    }
    blobs.push_back({"11," + std::to_string(seed) + "x" + std::to_string(i), size});
  }
  return blobs;
}

// `du -s --block-size=1 dir`, from the real du.
uint64_t Du(const std::string& dir) {
  std::string cmd = "du -s --block-size=1 " + dir;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  unsigned long long bytes = 0;
  REQUIRE(std::fscanf(p, "%llu", &bytes) == 1);
  ::pclose(p);
  return bytes;
}

// The one file in a tier directory.
std::string OnlyEntry(const std::string& tier_dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(tier_dir)) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  return files[0];
}

// Inserts a few blocks of each tier; returns (fid, blob size, offset) of each.
struct Probe {
  std::string fid;
  uint64_t size, offset;
};
std::vector<Probe> Fill(TieredCache& cache) {
  std::vector<Probe> probes = {
      {"12,s1", 3000, 0},       {"12,s2", 100 * kKiB, 0}, {"12,m1", 1 * kMiB, 64 * kKiB},
      {"12,m2", 300 * kKiB, 0}, {"12,l1", 4 * kMiB, 0},   {"12,l2", 4 * kMiB, 3 * kMiB}};
  std::string out;
  for (const Probe& p : probes) ReadThrough(cache, p.fid, p.size, p.offset, 1000, &out);
  return probes;
}
size_t CountHits(TieredCache& cache, const std::vector<Probe>& probes) {
  size_t hits = 0;
  std::string out(1000, '\0');
  for (const Probe& p : probes) {
    if (cache.Read(p.fid, p.size, p.offset, 1000, out.data())) {
      ++hits;
      CHECK(out == BlobBytes(p.fid, p.offset, 1000));
    }
  }
  return hits;
}

}  // namespace

TEST_CASE("du of the cache directory never exceeds the capacity") {
  TempDir tmp;
  const uint64_t capacity = 6 * kMiB;
  std::string dir = tmp.Sub("c");
  CacheOptions o = TestOptions(dir, capacity);
  auto cache = MustOpen(o);
  std::vector<Blob> blobs = MixedBlobs(60, 1);
  std::mt19937_64 rng(2);
  std::string out;
  uint64_t peak = 0;
  size_t hits = 0;
  const size_t lens[] = {4 * kKiB, 16 * kKiB, 128 * kKiB};
  for (int op = 0; op < 3000; ++op) {
    // Skewed: a third of the blobs get most reads.
    const Blob& b = blobs[rng() % 2 ? rng() % 20 : rng() % blobs.size()];
    size_t len = std::min<uint64_t>(lens[rng() % 3], b.size);
    uint64_t off = rng() % (b.size - len + 1);
    hits += ReadThrough(*cache, b.fid, b.size, off, len, &out);
    REQUIRE(out == BlobBytes(b.fid, off, len));
    if (op % 20 == 0) {
      uint64_t usage = DiskUsage(dir);
      peak = std::max(peak, usage);
      REQUIRE(usage <= capacity);
    }
  }
  CacheStats s = cache->GetStats();
  INFO(s.Summary());
  CHECK(peak > capacity * 8 / 10);  // the cache really was full, so the bound was tested
  CHECK(hits > 300);
  CHECK(s.tiers[0].evictions + s.tiers[1].evictions + s.tiers[2].evictions > 100);
  cache->Close();  // writes the index: still within the capacity
  CHECK(DiskUsage(dir) <= capacity);
  CHECK(Du(dir) <= capacity);
  CHECK(std::filesystem::exists(dir + "/" + format::kIndexFile));
}

TEST_CASE("evicted entries' files are reused, blocks and all, and no spare outlives the cache") {
  TempDir tmp;
  std::string dir = tmp.Sub("c");
  CacheOptions o = DiskOnlyOptions(dir, 8 * kMiB);
  auto cache = MustOpen(o);
  std::string out;
  // 100 blocks of 256 KiB through a large tier of about 4 MiB: most are evicted.
  auto fid = [](int i) { return "14,r" + std::to_string(i); };
  for (int i = 0; i < 100; ++i) {
    REQUIRE_FALSE(ReadThrough(*cache, fid(i), 4 * kMiB, 0, 4096, &out));
    REQUIRE(out == BlobBytes(fid(i), 0, 4096));
    REQUIRE(DiskUsage(dir) <= 8 * kMiB);
  }
  CacheStats s = cache->GetStats();
  INFO(s.Summary());
  REQUIRE(s.tiers[2].evictions > 50);
  // Each insert after the first eviction went into the file of an entry evicted for it (a
  // few more may go when the directory's growth takes room too, and their spares wait).
  CHECK(s.files_reused > 50);
  CHECK(s.files_reused + 4 >= s.tiers[2].evictions);
  CHECK(s.disk_errors == 0);
  for (int i = 96; i < 100; ++i) {
    CHECK(ReadThrough(*cache, fid(i), 4 * kMiB, 100000, 8192, &out));
    CHECK(out == BlobBytes(fid(i), 100000, 8192));
  }
  cache.reset();  // closes: writes the index, removes the spares, releases the directory
  for (const auto& e : std::filesystem::directory_iterator(dir + "/large")) {
    uint64_t id;
    CHECK(ParseEntryFileName(e.path().filename().string(), &id));
  }
  auto reopened = MustOpen(o);
  CHECK(ReadThrough(*reopened, fid(99), 4 * kMiB, 0, 4096, &out));
  CHECK(out == BlobBytes(fid(99), 0, 4096));
}

TEST_CASE("a deleted blob's entries wait as spares for the next writes (up to one per large block of the capacity)") {
  TempDir tmp;
  std::string dir = tmp.Sub("c");
  CacheOptions o = DiskOnlyOptions(dir, 200 * kMiB);  // room for 800 spares: more than 256
  auto cache = MustOpen(o);
  std::string out;
  auto fid = [](int i) { return "15,s" + std::to_string(i); };
  constexpr int kBlocks = 300;
  for (int i = 0; i < kBlocks; ++i) REQUIRE_FALSE(ReadThrough(*cache, fid(i), 4 * kMiB, 0, 4096, &out));
  for (int i = 0; i < kBlocks; ++i) cache->Forget(fid(i), 4 * kMiB);
  // They go in the background: wait until the last of them is a spare. A spare keeps its
  // blocks (the next entry is written over them), so they still count on disk.
  const uint64_t entry_size = EntryFileSize(fid(0).size(), 256 * 1024);
  auto spares = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/large")) {
      if (!e.path().filename().string().starts_with("spare-")) continue;
      ++n;
      CHECK(e.file_size() == entry_size);
    }
    return n;
  };
  CHECK(testing::Eventually([&] { return spares() == kBlocks; }));
  for (int i = 0; i < kBlocks; ++i) {
    REQUIRE_FALSE(ReadThrough(*cache, fid(kBlocks + i), 4 * kMiB, 0, 4096, &out));
    REQUIRE(out == BlobBytes(fid(kBlocks + i), 0, 4096));
  }
  CacheStats s = cache->GetStats();
  INFO(s.Summary());
  CHECK(s.tiers[2].forgotten == kBlocks);
  CHECK(s.files_reused == kBlocks);  // no file created for them
  CHECK(s.disk_errors == 0);
  CHECK(DiskUsage(dir) <= 200 * kMiB);
  for (int i = 0; i < kBlocks; i += 37) {
    CHECK(ReadThrough(*cache, fid(kBlocks + i), 4 * kMiB, 200000, 8192, &out));
    CHECK(out == BlobBytes(fid(kBlocks + i), 200000, 8192));
  }
}

TEST_CASE(
    "an entry written into a longer spare is cut to its own size, and spares never keep the cache "
    "past its capacity") {
  TempDir tmp;
  std::string dir = tmp.Sub("c");
  CacheOptions o = DiskOnlyOptions(dir, 8 * kMiB);
  auto cache = MustOpen(o);
  std::string out;
  // Full 256 KiB blocks of one blob, then the blob deleted: its files become spares.
  for (int b = 0; b < 8; ++b)
    REQUIRE_FALSE(ReadThrough(*cache, "16,full", 4 * kMiB, b * 256 * 1024, 4096, &out));
  cache->Forget("16,full", 4 * kMiB);
  auto count = [&](std::string_view prefix) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/large")) {
      if (e.path().filename().string().starts_with(prefix)) ++n;
    }
    return n;
  };
  REQUIRE(testing::Eventually([&] { return count("spare-") == 8; }));
  CHECK(cache->GetStats().disk_spare_bytes >= 8 * 256 * 1024);
  // The last block of a blob 4 MiB + 10,000 bytes long holds 10,000 bytes.
  const uint64_t blob = 4 * kMiB + 10000;
  REQUIRE_FALSE(ReadThrough(*cache, "16,tail", blob, 4 * kMiB, 10000, &out));
  REQUIRE(out == BlobBytes("16,tail", 4 * kMiB, 10000));
  CHECK(cache->GetStats().files_reused == 1);
  CHECK(count("spare-") == 7);
  CHECK(cache->GetStats().disk_spare_bytes < 8 * 256 * 1024);
  size_t cut = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/large")) {
    uint64_t id;
    if (!ParseEntryFileName(e.path().filename().string(), &id)) continue;
    CHECK(e.file_size() == EntryFileSize(std::string("16,tail").size(), 10000));
    ++cut;
  }
  CHECK(cut == 1);
  CHECK(ReadThrough(*cache, "16,tail", blob, 4 * kMiB + 5000, 5000, &out));
  CHECK(out == BlobBytes("16,tail", 4 * kMiB + 5000, 5000));
  // Many more blocks than the capacity holds, each into a spare or a new file: the files on
  // disk, spares included, stay within it.
  for (int i = 0; i < 60; ++i) {
    REQUIRE_FALSE(ReadThrough(*cache, "16,b" + std::to_string(i), 4 * kMiB, 0, 4096, &out));
    REQUIRE(DiskUsage(dir) <= 8 * kMiB);
  }
  CHECK(cache->GetStats().disk_errors == 0);
  // Reopened from its headers alone, the cache finds every entry whole.
  cache.reset();
  std::filesystem::remove(dir + "/" + format::kIndexFile);
  auto reopened = MustOpen(o);
  CHECK(ReadThrough(*reopened, "16,b59", 4 * kMiB, 0, 4096, &out));
  CHECK(out == BlobBytes("16,b59", 0, 4096));
  CHECK(reopened->GetStats().disk_errors == 0);
}

// A deleted file's entries leave in the background: a few at a time while the cache's files fit
// its capacity, all at once when an insert needs their room, and the rest at close.
TEST_CASE("forgotten entries' files go at a gentle pace, at full speed when their room is needed") {
  TempDir tmp;
  std::string dir = tmp.Sub("c");
  CacheOptions o = DiskOnlyOptions(dir, 40 * kMiB);
  o.forget_pause_ms = 3'600'000;  // after the first batch, only need or close moves them
  // The first deletion waits here until every Forget is queued, so exactly one batch (of up to
  // 16) goes before the pause, whatever the threads' timing.
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, released = false;
  o.testing_before_delete = [&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!armed) return;
    armed = false;
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return released; });
  };
  auto cache = MustOpen(o);
  std::string out;
  auto fid = [](int i) { return "16,f" + std::to_string(i); };
  auto entry_files = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir + "/large")) {
      uint64_t id;
      if (ParseEntryFileName(e.path().filename().string(), &id)) ++n;
    }
    return n;
  };
  constexpr int kBlocks = 64;  // 16 MiB of 256 KiB blocks
  for (int i = 0; i < kBlocks; ++i)
    REQUIRE_FALSE(ReadThrough(*cache, fid(i), 4 * kMiB, 0, 4096, &out));
  REQUIRE(entry_files() == kBlocks);
  {
    std::lock_guard<std::mutex> lock(mu);
    armed = true;
  }
  for (int i = 0; i < kBlocks; ++i) cache->Forget(fid(i), 4 * kMiB);
  CHECK(cache->GetStats().tiers[2].entries == 0);  // unreadable at once
  CHECK_FALSE(cache->Read(fid(0), 4 * kMiB, 0, 4096, out.data()));
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    cv.notify_all();
  }
  // The first batch goes, then the rest waits: the files fit the capacity.
  CHECK(testing::Eventually([&] { return entry_files() < kBlocks; }));
  CHECK(entry_files() >= kBlocks - 16);
  // The whole first batch became spares (they land together, after its last rename).
  REQUIRE(testing::Eventually([&] { return cache->GetStats().disk_spare_bytes > 0; }));
  SECTION("an insert that needs their room") {
    // 30 MiB of new blocks: with the 16 MiB still on disk, past the 40 MiB capacity. The first
    // 64 go over the files of the deleted blocks: the first batch's spares, then the files the
    // forget thread has not reached (no new file while one of those is there).
    for (int i = 0; i < 120; ++i) {
      REQUIRE_FALSE(ReadThrough(*cache, fid(1000 + i), 4 * kMiB, 0, 4096, &out));
      REQUIRE(out == BlobBytes(fid(1000 + i), 0, 4096));
      if (i == kBlocks - 1) CHECK(cache->GetStats().files_reused == kBlocks);
    }
    // As many as it takes for the files to fit the capacity again, not an entry evicted.
    CHECK(testing::Eventually([&] { return testing::DiskUsage(dir) <= o.capacity_bytes; }));
    CHECK(entry_files() < 120 + kBlocks - 16);
    CHECK(cache->GetStats().tiers[2].evictions == 0);
    cache.reset();  // the rest at close; the live entries stay
    CHECK(entry_files() == 120);
  }
  SECTION("the close") {
    cache.reset();
    CHECK(entry_files() == 0);
  }
}

// Two inserts into a full cache at once: the second one's room includes what the first one's
// evicted entries free, still being emptied (a truncate waits for the disk's discard of its
// blocks). It went in, where it used to wait for those files in a loop of yields and then
// give up.
TEST_CASE("an insert goes in while another insert's evicted entries are still being deleted") {
  TempDir tmp;
  std::string dir = tmp.Sub("c");
  CacheOptions o = DiskOnlyOptions(dir, 8 * kMiB);
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, held = false, released = false;
  // The first deletion after arming waits here until the test lets it go.
  o.testing_before_delete = [&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!armed) return;
    armed = false;
    held = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return released; });
  };
  auto cache = MustOpen(o);
  auto fid = [](int i) { return "19,h" + std::to_string(i); };
  std::string out;
  for (int i = 0; i < 40; ++i) REQUIRE_FALSE(ReadThrough(*cache, fid(i), 4 * kMiB, 0, 4096, &out));
  REQUIRE(cache->GetStats().tiers[2].evictions > 0);  // full: each insert evicts
  auto release = [&] {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    cv.notify_all();
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    armed = true;
  }
  std::thread first([&] {
    std::string o2;
    ReadThrough(*cache, fid(100), 4 * kMiB, 0, 4096, &o2);
  });
  struct Joiner {
    std::function<void()> release;
    std::thread* t;
    ~Joiner() {
      if (t == nullptr) return;
      release();
      t->join();
    }
  } joiner{release, &first};
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return held; }));
  }
  CHECK_FALSE(ReadThrough(*cache, fid(101), 4 * kMiB, 0, 4096, &out));
  CHECK(ReadThrough(*cache, fid(101), 4 * kMiB, 0, 4096, &out));  // it was stored
  CHECK(out == BlobBytes(fid(101), 0, 4096));
  release();
  first.join();
  joiner.t = nullptr;
  CHECK(ReadThrough(*cache, fid(100), 4 * kMiB, 0, 4096, &out));  // and so was the first
  CHECK(out == BlobBytes(fid(100), 0, 4096));
  CHECK(DiskUsage(dir) <= 8 * kMiB);
}

TEST_CASE("a corrupted entry is a miss, is dropped, and a re-insert heals it") {
  TempDir tmp;
  CacheOptions o = TestOptions(tmp.path(), 64 * kMiB);
  o.memory_bytes = 0;  // every read goes to disk
  auto cache = MustOpen(o);
  const std::string fid = "13,c";
  std::string out;
  REQUIRE_FALSE(ReadThrough(*cache, fid, 4 * kMiB, 300000, 16384, &out));
  std::string file = OnlyEntry(tmp.Sub("large"));
  uint64_t header = EntryDataOffset(fid.size(), 256 * kKiB);
  SECTION("data byte, first page read") {
    testing::FlipByte(file, header + (300000 - 256 * kKiB) + 5);
  }
  SECTION("data byte, last page read") {
    testing::FlipByte(file, header + (300000 + 16384 - 1 - 256 * kKiB));
  }

  out.assign(16384, '\0');
  CHECK_FALSE(cache->Read(fid, 4 * kMiB, 300000, 16384, out.data()));
  CacheStats s = cache->GetStats();
  CHECK(s.tiers[2].checksum_failures == 1);
  CHECK(s.tiers[2].entries == 0);
  CHECK(CountFiles(tmp.Sub("large")) == 0);
  CHECK_FALSE(ReadThrough(*cache, fid, 4 * kMiB, 300000, 16384, &out));  // refetched, reinserted
  CHECK(ReadThrough(*cache, fid, 4 * kMiB, 300000, 16384, &out));
  CHECK(out == BlobBytes(fid, 300000, 16384));
}

TEST_CASE("an I/O error reading an entry is a miss, counted, and the block is refetched") {
  TempDir tmp;
  CacheOptions o = TestOptions(tmp.path(), 64 * kMiB);
  auto cache = MustOpen(o);
  std::string out;
  REQUIRE_FALSE(ReadThrough(*cache, "13,e", 4 * kMiB, 0, 4096, &out));
  // A directory in place of the file: open() works, read() fails with EISDIR, unlink() too.
  std::string file = OnlyEntry(tmp.Sub("large"));
  std::filesystem::remove(file);
  std::filesystem::create_directory(file);
  out.assign(4096, '\0');
  CHECK_FALSE(cache->Read("13,e", 4 * kMiB, 0, 4096, out.data()));
  CacheStats s = cache->GetStats();
  CHECK(s.disk_errors >= 1);
  CHECK(s.tiers[2].checksum_failures == 0);
  CHECK(s.tiers[2].entries == 0);
  CHECK_FALSE(ReadThrough(*cache, "13,e", 4 * kMiB, 0, 4096, &out));
  CHECK(ReadThrough(*cache, "13,e", 4 * kMiB, 0, 4096, &out));
  CHECK(out == BlobBytes("13,e", 0, 4096));
}

TEST_CASE("a restart keeps the warm cache") {
  TempDir tmp;
  std::vector<Probe> probes;
  {
    auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
    probes = Fill(*cache);
    REQUIRE(CountHits(*cache, probes) == probes.size());
  }
  SECTION("clean shutdown: from the index") {}
  SECTION("crash: no index, entry headers are scanned") {
    REQUIRE(std::filesystem::remove(tmp.Sub(format::kIndexFile)));
  }
  SECTION("damaged index is ignored") { testing::FlipByte(tmp.Sub(format::kIndexFile), 40); }
  MetricsRegistry registry;
  CacheOptions o = TestOptions(tmp.path(), 64 * kMiB);
  auto cache = MustOpen(o);
  CHECK(CountHits(*cache, probes) == probes.size());
  CacheStats s = cache->GetStats();
  CHECK(s.tiers[0].memory_hits == 0);  // served from disk
  CHECK(s.tiers[0].entries + s.tiers[1].entries + s.tiers[2].entries == 6);
}

TEST_CASE("on restart, torn and foreign files in tier directories are removed") {
  TempDir tmp;
  std::vector<Probe> probes;
  {
    auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
    probes = Fill(*cache);
  }
  std::filesystem::remove(tmp.Sub(format::kIndexFile));
  std::vector<std::string> large;
  for (const auto& e : std::filesystem::directory_iterator(tmp.Sub("large"))) {
    large.push_back(e.path());
  }
  REQUIRE(large.size() == 2);
  REQUIRE(::truncate(large[0].c_str(), 1000) == 0);           // torn write from a crash
  testing::FlipByte(large[1], format::kEntryOffBlockOffset);  // damaged header
  std::ofstream(tmp.Sub("medium/junk.tmp")) << "x";
  std::ofstream(tmp.Sub("large/" + SpareFileName(9)));  // a spare a crash left behind
  std::ofstream(tmp.Sub("small/00000000000000zz")) << "x";
  auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
  CHECK(CountHits(*cache, probes) == probes.size() - 2);
  CHECK(CountFiles(tmp.Sub("large")) == 0);
  CHECK_FALSE(std::filesystem::exists(tmp.Sub("medium/junk.tmp")));
  CHECK_FALSE(std::filesystem::exists(tmp.Sub("large/" + SpareFileName(9))));
  CHECK_FALSE(std::filesystem::exists(tmp.Sub("small/00000000000000zz")));
}

// Two sessions' files for one block (a crash between them): the scan keeps one and deletes the
// other, blocks and all, rather than keep it as a spare its accounting knows nothing of.
TEST_CASE("a block found twice at open keeps one file, and the other goes") {
  TempDir tmp;
  const std::string fid = "18,dup";
  {
    auto cache = MustOpen(DiskOnlyOptions(tmp.path(), 64 * kMiB));
    std::string out;
    REQUIRE_FALSE(ReadThrough(*cache, fid, 4 * kMiB, 0, 4096, &out));
  }
  std::filesystem::remove(tmp.Sub(format::kIndexFile));
  std::string data = BlobBytes(fid, 0, 256 * kKiB);
  EntryRef ref{fid, 4 * kMiB, 0, static_cast<uint32_t>(data.size()), Tier::kLarge, 1'000'000};
  int dirfd = ::open(tmp.Sub("large").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(dirfd >= 0);
  const bool written = WriteEntryFile(dirfd, ref, PageSums(data), data).ok();
  ::close(dirfd);
  REQUIRE(written);
  REQUIRE(CountFiles(tmp.Sub("large")) == 2);
  auto cache = MustOpen(DiskOnlyOptions(tmp.path(), 64 * kMiB));
  CHECK(cache->GetStats().tiers[2].entries == 1);
  CHECK(cache->GetStats().disk_spare_bytes == 0);
  CHECK(testing::Eventually([&] { return CountFiles(tmp.Sub("large")) == 1; }));
  std::string out;
  CHECK(ReadThrough(*cache, fid, 4 * kMiB, 8192, 4096, &out));
  CHECK(out == BlobBytes(fid, 8192, 4096));
}

TEST_CASE("a directory of another version, layout or in bad shape is wiped, nothing else") {
  TempDir tmp;
  std::vector<Probe> probes;
  {
    auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
    probes = Fill(*cache);
  }
  std::ofstream(tmp.Sub("notes.txt")) << "not the cache's";
  CacheOptions o = TestOptions(tmp.path(), 64 * kMiB);
  SECTION("garbage version file") {
    std::ofstream(tmp.Sub(format::kVersionFile)) << "kelp-cache 0\n\x01\x02";
  }
  SECTION("version file missing") { std::filesystem::remove(tmp.Sub(format::kVersionFile)); }
  SECTION("other layout") { o.large_block_size = 1 * kMiB; }
  SECTION("tier directory replaced by a file") {
    std::filesystem::remove_all(tmp.Sub("medium"));
    std::ofstream(tmp.Sub("medium")) << "x";
  }
  auto cache = MustOpen(o);
  CHECK(cache->GetStats().disk_enabled);
  CHECK(CountHits(*cache, probes) == 0);
  CHECK(std::filesystem::exists(tmp.Sub("notes.txt")));
  for (const char* t : format::kTierDirs) CHECK(std::filesystem::is_directory(tmp.Sub(t)));
  // And the fresh directory works.
  std::string out;
  CHECK_FALSE(ReadThrough(*cache, "14,n", 4 * kMiB, 0, 10, &out));
  CHECK(ReadThrough(*cache, "14,n", 4 * kMiB, 0, 10, &out));
}

TEST_CASE("a shrunk capacity is enforced on open") {
  TempDir tmp;
  {
    auto cache = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
    std::string out;
    for (int i = 0; i < 40; ++i)
      ReadThrough(*cache, "15," + std::to_string(i), 4 * kMiB, 0, 10, &out);
  }
  REQUIRE(DiskUsage(tmp.path()) > 8 * kMiB);
  auto cache = MustOpen(TestOptions(tmp.path(), 2 * kMiB));
  CHECK(DiskUsage(tmp.path()) <= 2 * kMiB);
  CHECK(cache->GetStats().tiers[2].entries > 0);
}

TEST_CASE("a second cache on the same directory runs without disk tiers") {
  TempDir tmp;
  auto first = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
  auto second = MustOpen(TestOptions(tmp.path(), 64 * kMiB));
  CHECK(first->GetStats().disk_enabled);
  CHECK_FALSE(second->GetStats().disk_enabled);
  std::string out;
  CHECK_FALSE(ReadThrough(*second, "16,a", 4 * kMiB, 0, 10, &out));
  CHECK_FALSE(second->Read("16,a", 4 * kMiB, 0, 10, out.data()));
}

TEST_CASE("an unusable directory degrades to the memory layer, never to an error") {
  TempDir tmp;
  std::ofstream(tmp.Sub("file")) << "x";
  auto cache = MustOpen(TestOptions(tmp.Sub("file/cache"), 64 * kMiB));
  CHECK_FALSE(cache->GetStats().disk_enabled);
  std::string out;
  CHECK_FALSE(ReadThrough(*cache, "17,s", 2000, 0, 100, &out));
  CHECK(ReadThrough(*cache, "17,s", 2000, 0, 100, &out));  // memory layer
  CHECK_FALSE(ReadThrough(*cache, "17,l", 4 * kMiB, 0, 100, &out));
  CHECK_FALSE(ReadThrough(*cache, "17,l", 4 * kMiB, 0, 100, &out));
}

TEST_CASE("a full filesystem degrades to misses") {
  testing::TmpfsMount fs(1 * kMiB);
  if (!fs.ok()) {
    WARN("cannot mount tmpfs here; skipped");
    return;
  }
  CacheOptions o = TestOptions(fs.path() + "/cache", 64 * kMiB);  // far more than the fs has
  auto cache = MustOpen(o);
  size_t stored = 0;
  for (int i = 0; i < 8; ++i) {
    std::string fid = "18," + std::to_string(i);
    stored += cache->Insert(fid, 4 * kMiB, 0, BlobBytes(fid, 0, 256 * kKiB));
  }
  CHECK(stored >= 1);
  CHECK(stored < 8);
  CacheStats s = cache->GetStats();
  CHECK(s.disk_errors >= 1);
  CHECK(s.tiers[2].entries == stored);
  size_t hits = 0;
  std::string out(4096, '\0');
  for (int i = 0; i < 8; ++i) {
    std::string fid = "18," + std::to_string(i);
    if (cache->Read(fid, 4 * kMiB, 4096, 4096, out.data())) {
      ++hits;
      CHECK(out == BlobBytes(fid, 4096, 4096));
    }
  }
  CHECK(hits == stored);
}

TEST_CASE("a filesystem gone read-only keeps serving what it holds") {
  testing::TmpfsMount fs(16 * kMiB);
  if (!fs.ok()) {
    WARN("cannot mount tmpfs here; skipped");
    return;
  }
  std::string dir = fs.path() + "/cache";
  std::vector<Probe> probes;
  {
    auto cache = MustOpen(TestOptions(dir, 8 * kMiB));
    probes = Fill(*cache);
    REQUIRE(fs.RemountReadOnly());
    std::string out;
    CHECK_FALSE(ReadThrough(*cache, "19,new", 4 * kMiB, 0, 10, &out));
    CHECK_FALSE(ReadThrough(*cache, "19,new", 4 * kMiB, 0, 10, &out));
    CHECK(cache->GetStats().disk_errors >= 1);
    CHECK(CountHits(*cache, probes) == probes.size());
  }  // Close cannot write the index: logged, not an error
  auto cache = MustOpen(TestOptions(dir, 8 * kMiB));  // reopen on the read-only fs
  CHECK(cache->GetStats().disk_enabled);
  CHECK(CountHits(*cache, probes) == probes.size());
}

}  // namespace kelp::mount::cache
