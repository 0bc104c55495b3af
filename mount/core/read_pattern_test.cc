#include "mount/core/read_pattern.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

namespace kelp::mount {
namespace {

TEST_CASE("a reader streaming from the start is sequential from its second read") {
  ReadPattern p;
  CHECK_FALSE(p.OnRead(0, 131072));
  for (uint64_t off = 131072; off < (64 << 20); off += 131072) REQUIRE(p.OnRead(off, 131072));
}

TEST_CASE("kernel read-ahead delivered out of order still streams") {
  ReadPattern p;
  std::mt19937 rng(7);
  const uint64_t req = 131072;
  int sequential = 0, reads = 0;
  for (uint64_t batch = 0; batch < 64; ++batch) {
    // Four requests in flight, delivered in any order.
    std::vector<uint64_t> offs;
    for (uint64_t i = 0; i < 4; ++i) offs.push_back((batch * 4 + i) * req);
    std::shuffle(offs.begin(), offs.end(), rng);
    for (uint64_t o : offs) {
      sequential += p.OnRead(o, req);
      ++reads;
    }
  }
  CHECK(sequential >= reads - 8);
}

TEST_CASE("random reads in a small file are not taken for a stream") {
  // sysbench fileio: 16 KiB reads at random aligned offsets of 8 MiB files.
  ReadPattern p;
  std::mt19937 rng(11);
  int sequential = 0;
  for (int i = 0; i < 10000; ++i) sequential += p.OnRead((rng() % 512) * 16384, 16384);
  CHECK(sequential < 100);  // a chance hit on a recent end, twice in a row, and its near tail
}

TEST_CASE("a jump ends a stream, streaming from the new place resumes it") {
  ReadPattern p;
  for (uint64_t off = 0; off < (8 << 20); off += 65536) p.OnRead(off, 65536);
  CHECK(p.OnRead(8 << 20, 65536));
  CHECK_FALSE(p.OnRead(1ULL << 30, 65536));
  CHECK_FALSE(p.OnRead((1ULL << 30) + 65536, 65536));  // one contiguous read: not yet
  CHECK(p.OnRead((1ULL << 30) + 2 * 65536, 65536));
}

}  // namespace
}  // namespace kelp::mount
