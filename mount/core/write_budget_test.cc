#include "mount/core/write_budget.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

namespace kelp::mount {
namespace {

TEST_CASE("a writer over the budget waits until room is released, and pushes pressure") {
  WriteBudget b(100);
  std::atomic<int> pressure{0};
  b.SetPressureCallback([&] { ++pressure; });
  b.Acquire(80);
  REQUIRE(pressure == 1);  // past half full
  std::atomic<bool> done{false};
  std::thread t([&] {
    b.Acquire(50);
    done = true;
  });
  // The writer cannot proceed while 80 of 100 are held.
  for (int i = 0; i < 1000 && pressure == 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(pressure > 1);
  REQUIRE_FALSE(done);
  b.Release(40);
  t.join();
  REQUIRE(done);
  REQUIRE(b.used() == 90);
  REQUIRE(b.waits() == 1);
  REQUIRE_FALSE(b.TryAcquire(20));
  REQUIRE(b.TryAcquire(10));
}

TEST_CASE("uploads start when the budget passes half full, once per crossing") {
  WriteBudget b(100);
  int pressure = 0;
  b.SetPressureCallback([&] { ++pressure; });
  b.Acquire(30);
  CHECK(pressure == 0);
  b.Acquire(20);  // 50: half
  CHECK(pressure == 1);
  b.Acquire(10);
  b.Acquire(10);
  CHECK(pressure == 1);  // not on every write above it
  b.Release(40);         // 30
  b.Acquire(25);         // 55: crossed again
  CHECK(pressure == 2);
  CHECK(b.waits() == 0);
}

TEST_CASE("a request bigger than the budget is clamped, not stuck") {
  WriteBudget b(100);
  b.Acquire(1000);
  REQUIRE(b.used() == 100);
  b.Release(100);
  REQUIRE(b.used() == 0);
}

}  // namespace
}  // namespace kelp::mount
