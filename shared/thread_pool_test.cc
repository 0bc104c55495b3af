#include "shared/thread_pool.h"

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

TEST_CASE("thread pool runs everything submitted before stop") {
  std::atomic<int> n{0};
  {
    kelp::ThreadPool pool("t", 4, 8);
    for (int i = 0; i < 1000; ++i) REQUIRE(pool.Submit([&] { n.fetch_add(1); }));
    pool.Stop();
    CHECK_FALSE(pool.Submit([] {}));
  }
  CHECK(n.load() == 1000);
}

TEST_CASE("try submit refuses when the queue is full") {
  std::atomic<bool> release{false};
  kelp::ThreadPool pool("t", 1, 1);
  REQUIRE(pool.Submit([&] {
    while (!release.load()) std::this_thread::yield();
  }));
  // One task may be queued behind the running one; the next must be refused.
  bool refused = false;
  for (int i = 0; i < 3 && !refused; ++i) refused = !pool.TrySubmit([] {});
  CHECK(refused);
  release = true;
}

TEST_CASE("thread pool: busy counts the tasks queued and running, and falls back to zero") {
  std::atomic<bool> release{false};
  std::atomic<int> started{0};
  kelp::ThreadPool pool("t", 1, 4);
  CHECK(pool.busy() == 0);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pool.Submit([&] {
      started.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    }));
  }
  while (started.load() == 0) std::this_thread::yield();
  CHECK(pool.busy() == 3);  // one running, two queued
  release = true;
  pool.Stop();
  CHECK(pool.busy() == 0);
  CHECK(started.load() == 3);
}
