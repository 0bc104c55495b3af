#include "volume/http/upload_budget.h"

#include <thread>

#include <catch2/catch.hpp>

using kelp::volume::UploadBudget;
using namespace std::chrono_literals;

TEST_CASE("upload budget admits up to its capacity and waits for releases") {
  UploadBudget b(100);
  CHECK(b.Acquire(60, 0ms) == 60);
  CHECK(b.Acquire(60, 10ms) == 0);  // no room
  CHECK(b.Acquire(40, 0ms) == 40);
  uint64_t got = 0;
  std::thread waiter([&] { got = b.Acquire(50, 60s); });
  for (int i = 0; i < 20000 && b.waiters() == 0; ++i) std::this_thread::sleep_for(1ms);
  CHECK(b.waiters() == 1);  // it waits for room...
  auto released = std::chrono::steady_clock::now();
  b.Release(60);
  waiter.join();
  CHECK(got == 50);  // ...and is admitted when the release comes, not when its wait runs out
  CHECK(std::chrono::steady_clock::now() - released < 30s);
  b.Release(40);
  b.Release(50);
  CHECK(b.Acquire(1000, 0ms) == 100);  // one oversized upload may still go alone
  CHECK(b.Acquire(1, 0ms) == 0);
}
