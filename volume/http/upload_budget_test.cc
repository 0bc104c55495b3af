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
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    b.Release(60);
  });
  CHECK(b.Acquire(50, 5s) == 50);  // admitted once the release comes
  releaser.join();
  b.Release(40);
  b.Release(50);
  CHECK(b.Acquire(1000, 0ms) == 100);  // one oversized upload may still go alone
  CHECK(b.Acquire(1, 0ms) == 0);
}
