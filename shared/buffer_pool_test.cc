#include "shared/buffer_pool.h"

#include <cstring>

#include <catch2/catch.hpp>

namespace kelp {

TEST_CASE("buffer pool: a buffer given back is taken again, within its size range and count") {
  BufferPool pool(2, 1024, 4096);
  BufferPool::Buffer a = pool.Take(2048);
  REQUIRE(a);
  CHECK(a.capacity == 2048);
  std::memset(a.get(), 'x', 2048);
  char* const first = a.get();
  pool.Give(std::move(a));
  CHECK(pool.kept() == 1);

  // Large enough: the same memory, its bytes as they were left (never zeroed).
  BufferPool::Buffer b = pool.Take(1500);
  CHECK(b.get() == first);
  CHECK(b.capacity == 2048);
  CHECK(b.get()[2047] == 'x');
  CHECK(pool.kept() == 0);
  pool.Give(std::move(b));

  // Too large for any kept one, or out of the range: a fresh buffer; the kept one stays.
  BufferPool::Buffer big = pool.Take(3000);
  CHECK(big.get() != first);
  CHECK(big.capacity == 3000);
  BufferPool::Buffer small = pool.Take(100);
  CHECK(small.capacity == 100);
  CHECK(pool.kept() == 1);

  // Given back: out-of-range sizes are freed, and at most two are kept.
  pool.Give(std::move(small));
  pool.Give(pool.Take(8192));
  CHECK(pool.kept() == 1);
  pool.Give(std::move(big));
  CHECK(pool.kept() == 2);
  pool.Give(BufferPool::Buffer{std::make_unique<char[]>(2000), 2000});
  CHECK(pool.kept() == 2);
  pool.Give(BufferPool::Buffer{});  // an empty one is ignored
  CHECK(pool.kept() == 2);
}

}  // namespace kelp
