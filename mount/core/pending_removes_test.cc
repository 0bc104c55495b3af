#include "mount/core/pending_removes.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

namespace kelp::mount {
namespace {

TEST_CASE("pending removes: names by directory, and the waits end when the filer answered") {
  PendingRemoves p(2);
  CHECK_FALSE(p.Any());
  p.Add(1, "a");
  p.Add(2, "b");
  CHECK(p.Any());
  CHECK(p.Has(1, "a"));
  CHECK_FALSE(p.Has(1, "b"));
  CHECK(p.size() == 2);
  p.WaitDir(3);  // nothing pending there: returns at once

  std::atomic<bool> added{false};
  std::thread adder([&] {
    p.Add(1, "c");  // the bound (2) holds it until one is done
    added = true;
  });
  std::atomic<bool> dir_clear{false};
  std::thread waiter([&] {
    p.WaitDir(1);
    dir_clear = true;
  });
  CHECK_FALSE(added.load());
  p.Done(2, "b");
  adder.join();
  CHECK(added.load());
  CHECK(p.Has(1, "c"));
  CHECK_FALSE(dir_clear.load());  // a and c are still pending in 1
  p.Done(1, "a");
  CHECK_FALSE(p.Has(1, "a"));
  p.Done(1, "c");
  waiter.join();
  CHECK(dir_clear.load());
  CHECK_FALSE(p.Any());
  p.Done(1, "c");  // an answer for a name not pending is ignored
  p.WaitAll();
  CHECK(p.size() == 0);
}

}  // namespace
}  // namespace kelp::mount
