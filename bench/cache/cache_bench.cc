// Micro-benchmark of the mount's read cache (mount/cache/). Prints markdown tables:
//  1. eviction hit ratios, S3-FIFO vs LRU vs FIFO, on Zipf key streams (policy simulation,
//     unit-size entries) with and without a one-pass scan mixed in;
//  2. the same comparison end to end through TieredCache on a real directory: 16 KiB reads of
//     4 MiB chunks, Zipf over 256 KiB blocks;
//  3. throughput of warm 16 KiB / 4 KiB random reads (1 and 2 threads), of small-blob reads
//     (memory layer and disk), and of 256 KiB inserts with eviction running.
// Usage: cache_bench [-dir=/tmp/kelp-cache-bench] [-e2e_dir=/dev/shm/...] [-seconds=2] [-quick]
//                    [-sections=policy,e2e,throughput]
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "bench/cache/zipf.h"
#include "mount/cache/eviction_policy.h"
#include "mount/cache/tiered_cache.h"
#include "shared/flags.h"
#include "shared/log.h"

namespace kelp::bench {
namespace {

using mount::cache::CacheOptions;
using mount::cache::CacheStats;
using mount::cache::EvictionKind;
using mount::cache::EvictionName;
using mount::cache::MakeEvictionPolicy;
using mount::cache::TieredCache;

constexpr uint64_t kKiB = 1 << 10;
constexpr uint64_t kMiB = 1 << 20;
constexpr EvictionKind kKinds[] = {EvictionKind::kFifo, EvictionKind::kLru, EvictionKind::kS3Fifo};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// ---- 1. policy simulation ----

// Hit ratio of a cache of `capacity` unit entries. With scan, every other request is a key
// never seen before (a one-pass sequential read running alongside).
double Simulate(EvictionKind kind, const Zipf& zipf, uint64_t capacity, uint64_t requests,
                bool scan) {
  auto policy = MakeEvictionPolicy(kind);
  absl::flat_hash_set<uint64_t> cached;
  std::mt19937_64 rng(42);
  uint64_t hits = 0, lookups = 0, scan_key = 1ull << 40;
  for (uint64_t i = 0; i < requests; ++i) {
    bool scanning = scan && i % 2 == 1;
    uint64_t key = scanning ? scan_key++ : zipf.Next(rng);
    if (!scanning) ++lookups;
    if (cached.contains(key)) {
      hits += !scanning;
      policy->Touch(key);
      continue;
    }
    while (cached.size() >= capacity) cached.erase(*policy->Evict());
    policy->Add(key, 1);
    cached.insert(key);
  }
  return static_cast<double>(hits) / static_cast<double>(lookups);
}

void PolicyTable(bool quick) {
  const uint64_t keys = 100000, requests = quick ? 500000 : 2000000;
  std::printf("\n### Eviction, simulated: %llu keys, %llu requests, unit-size entries\n\n",
              static_cast<unsigned long long>(keys), static_cast<unsigned long long>(requests));
  std::printf("| workload | cache size | FIFO | LRU | S3-FIFO |\n|---|---|---|---|---|\n");
  for (bool scan : {false, true}) {
    for (double alpha : {0.8, 1.0, 1.2}) {
      Zipf zipf(keys, alpha, 7);
      for (double frac : {0.01, 0.05, 0.2}) {
        std::printf("| Zipf %.1f%s | %.0f%% |", alpha, scan ? " + scan" : "", 100 * frac);
        for (EvictionKind k : kKinds) {
          double r = Simulate(k, zipf, static_cast<uint64_t>(frac * keys), requests, scan);
          std::printf(" %.1f%% |", 100 * r);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
}

// ---- 2. end to end through TieredCache ----

const std::string& Payload() {  // stands in for what a volume server would send
  static const std::string* p = [] {
    auto* s = new std::string(4 * kMiB, '\0');
    std::mt19937_64 rng(1);
    for (char& c : *s) c = static_cast<char>(rng());
    return s;
  }();
  return *p;
}

std::unique_ptr<TieredCache> OpenFresh(const std::string& dir, CacheOptions o) {
  std::filesystem::remove_all(dir);
  o.dir = dir;
  o.metrics = nullptr;
  auto cache = TieredCache::Open(std::move(o));
  if (!cache.ok()) {
    std::fprintf(stderr, "open: %s\n", cache.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*cache);
}

// The mount's read path, with Payload() as the network.
bool ReadThrough(TieredCache& cache, const std::string& fid, uint64_t size, uint64_t off,
                 size_t len, char* dst) {
  if (cache.Read(fid, size, off, len, dst)) return true;
  TieredCache::ByteRange r = cache.FetchRange(size, off, len);
  std::string_view data = std::string_view(Payload()).substr(r.begin, r.size());
  std::memcpy(dst, data.data() + (off - r.begin), len);
  cache.Insert(fid, size, r.begin, data);
  return false;
}

void EndToEndTable(const std::string& dir, bool quick) {
  const uint64_t blobs = 64, blob_size = 4 * kMiB, blocks_per_blob = blob_size / (256 * kKiB);
  const uint64_t capacity = 32 * kMiB, requests = quick ? 10000 : 30000;
  std::printf(
      "\n### Eviction, end to end: TieredCache, %llu MiB of 4 MiB chunks, capacity %llu "
      "MiB, 16 KiB reads, Zipf over 256 KiB blocks, %llu reads\n\n",
      static_cast<unsigned long long>(blobs * blob_size / kMiB),
      static_cast<unsigned long long>(capacity / kMiB), static_cast<unsigned long long>(requests));
  std::printf("| workload | FIFO | LRU | S3-FIFO |\n|---|---|---|---|\n");
  std::vector<char> buf(16 * kKiB);
  for (bool scan : {false, true}) {
    for (double alpha : {0.8, 1.0}) {
      std::printf("| Zipf %.1f%s |", alpha, scan ? " + sequential scan with read-ahead" : "");
      for (EvictionKind kind : kKinds) {
        CacheOptions o;
        o.capacity_bytes = capacity;
        o.memory_bytes = 0;
        o.eviction = kind;
        auto cache = OpenFresh(dir, o);
        Zipf zipf(blobs * blocks_per_blob, alpha, 7);
        std::mt19937_64 rng(42);
        uint64_t hits = 0, scan_pos = 0;
        for (uint64_t i = 0; i < requests; ++i) {
          if (scan && i % 2 == 1) {  // a big sequential read of chunks nobody reads again
            std::string fid = "90," + std::to_string(scan_pos / blob_size);
            if (scan_pos % (256 * kKiB) == 0) {  // the mount's read-ahead fetches whole blocks
              cache->Insert(fid, blob_size, scan_pos % blob_size,
                            std::string_view(Payload()).substr(scan_pos % blob_size, 256 * kKiB));
            }
            ReadThrough(*cache, fid, blob_size, scan_pos % blob_size, 16 * kKiB, buf.data());
            scan_pos += 16 * kKiB;
            continue;
          }
          uint64_t block = zipf.Next(rng);
          std::string fid = "80," + std::to_string(block / blocks_per_blob);
          uint64_t off = (block % blocks_per_blob) * 256 * kKiB + (rng() % 16) * 16 * kKiB;
          hits += ReadThrough(*cache, fid, blob_size, off, 16 * kKiB, buf.data());
        }
        uint64_t lookups = scan ? requests / 2 : requests;
        std::printf(" %.1f%% |", 100.0 * static_cast<double>(hits) / static_cast<double>(lookups));
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
  std::filesystem::remove_all(dir);
}

// ---- 3. throughput ----

struct Rate {
  double ops_per_s, bytes_per_s;
};

// Runs fn(thread, rng) in `threads` threads for `seconds`; fn returns bytes moved.
template <typename Fn>
Rate Run(int threads, double seconds, Fn fn) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops{0}, bytes{0};
  std::vector<std::thread> ts;
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      uint64_t n = 0, b = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 64; ++i, ++n) b += fn(t, rng);
      }
      ops += n;
      bytes += b;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  double s = Seconds(start);
  return {static_cast<double>(ops.load()) / s, static_cast<double>(bytes.load()) / s};
}

void PrintRate(const char* what, int threads, Rate r) {
  std::printf("| %s | %d | %.0f | %.2f |\n", what, threads, r.ops_per_s, r.bytes_per_s / 1e9);
  std::fflush(stdout);
}

void ThroughputTable(const std::string& dir, double seconds, bool reads, bool small, bool inserts) {
  std::printf("\n### Throughput (%s, %.0f s per row)\n\n", dir.c_str(), seconds);
  std::printf("| operation | threads | ops/s | GB/s |\n|---|---|---|---|\n");
  const uint64_t blob_size = 4 * kMiB, blobs = 32;
  std::vector<std::string> fids;
  for (uint64_t i = 0; i < blobs; ++i) fids.push_back("70," + std::to_string(i));
  if (reads) {
    CacheOptions o;
    o.capacity_bytes = 512 * kMiB;
    auto cache = OpenFresh(dir, o);
    for (const std::string& fid : fids) cache->Insert(fid, blob_size, 0, Payload());
    std::vector<std::vector<char>> bufs(2, std::vector<char>(16 * kKiB));
    for (size_t len : {16 * kKiB, 4 * kKiB}) {
      for (int threads : {1, 2}) {
        std::atomic<uint64_t> misses{0};
        Rate r = Run(threads, seconds, [&](int t, std::mt19937_64& rng) -> uint64_t {
          const std::string& fid = fids[rng() % blobs];
          uint64_t off = (rng() % (blob_size / len)) * len;
          if (!cache->Read(fid, blob_size, off, len, bufs[t].data())) misses++;
          return len;
        });
        if (misses) std::printf("(unexpected misses: %llu)\n", (unsigned long long)misses.load());
        PrintRate(len == 16 * kKiB ? "warm 16 KiB random read, large tier (disk)"
                                   : "warm 4 KiB random read, large tier (disk)",
                  threads, r);
      }
    }
    // For scale: the same 16 KiB random reads straight from the page cache, over 32 plain
    // 4 MiB files, with open+pread+close and no verification (what a passthrough does).
    std::vector<std::string> raw;
    for (uint64_t i = 0; i < blobs; ++i) {
      raw.push_back(dir + "/raw" + std::to_string(i));
      int fd = ::open(raw.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (::write(fd, Payload().data(), Payload().size()) < 0) std::perror("write");
      ::close(fd);
    }
    Rate r = Run(1, seconds, [&](int, std::mt19937_64& rng) -> uint64_t {
      int fd = ::open(raw[rng() % blobs].c_str(), O_RDONLY);
      ssize_t n = ::pread(fd, bufs[0].data(), 16 * kKiB, (rng() % 256) * 16 * kKiB);
      ::close(fd);
      return n > 0 ? static_cast<uint64_t>(n) : 0;
    });
    PrintRate("baseline: open+pread+close 16 KiB, page cache, no checksum", 1, r);
  }
  for (bool memory : {true, false}) {
    if (!small) break;
    CacheOptions o;
    o.capacity_bytes = 512 * kMiB;
    if (!memory) o.memory_bytes = 0;
    auto cache = OpenFresh(dir, o);
    const uint64_t n = 2000, size = 4 * kKiB;
    for (uint64_t i = 0; i < n; ++i) {
      cache->Insert("60," + std::to_string(i), size, 0,
                    std::string_view(Payload()).substr(0, size));
    }
    std::vector<std::vector<char>> bufs(2, std::vector<char>(size));
    for (int threads : {1, 2}) {
      Rate r = Run(threads, seconds, [&](int t, std::mt19937_64& rng) -> uint64_t {
        cache->Read("60," + std::to_string(rng() % n), size, 0, size, bufs[t].data());
        return size;
      });
      PrintRate(memory ? "4 KiB small blob read, memory layer" : "4 KiB small blob read, disk",
                threads, r);
    }
  }
  for (int threads : {1, 2}) {
    if (!inserts) break;
    CacheOptions o;
    o.capacity_bytes = 64 * kMiB;  // full after 256 inserts: the rest evict as they go
    auto cache = OpenFresh(dir, o);
    std::atomic<uint64_t> next{0};
    Rate r = Run(threads, seconds, [&](int, std::mt19937_64&) -> uint64_t {
      uint64_t i = next++;
      std::string fid = "50," + std::to_string(i / 16);
      cache->Insert(fid, blob_size, (i % 16) * 256 * kKiB,
                    std::string_view(Payload()).substr((i % 16) * 256 * kKiB, 256 * kKiB));
      return 256 * kKiB;
    });
    PrintRate("insert 256 KiB block (with eviction)", threads, r);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kelp::bench

int main(int argc, char** argv) {
  std::string dir = "/tmp/kelp-cache-bench";
  std::string e2e_dir = "/dev/shm/kelp-cache-bench-e2e";
  double seconds = 2;
  bool quick = false;
  std::string sections = "policy,e2e,throughput";
  kelp::FlagSet flags("cache_bench", "cache_bench [flags]",
                      "Benchmarks the mount's read cache (eviction hit ratios, throughput).");
  flags.Add("dir", &dir, "scratch cache directory for the throughput rows (wiped)");
  flags.Add("e2e_dir", &e2e_dir,
            "scratch cache directory for the end-to-end hit ratios (wiped; tmpfs by default, as "
            "they write gigabytes and only count hits)");
  flags.Add("seconds", &seconds, "duration of each throughput row, in seconds");
  flags.Add("quick", &quick, "fewer requests, for a smoke run");
  flags.Add("sections", &sections,
            "which tables to print: policy, e2e, throughput (or just reads, small, inserts)");
  flags.ParseOrExit(argc - 1, argv + 1);
  spdlog::set_level(spdlog::level::warn);
  auto want = [&](std::string_view s) { return sections.find(s) != std::string::npos; };
  if (want("policy")) kelp::bench::PolicyTable(quick);
  if (want("e2e")) kelp::bench::EndToEndTable(e2e_dir, quick);
  bool all = want("throughput");
  if (all || want("reads") || want("small") || want("inserts")) {
    kelp::bench::ThroughputTable(dir, quick ? 0.5 : seconds, all || want("reads"),
                                 all || want("small"), all || want("inserts"));
  }
  return 0;
}
