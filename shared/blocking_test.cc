#include "shared/blocking.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

namespace kelp {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Pipe {
  Pipe() { REQUIRE(pipe(fds) == 0); }
  ~Pipe() {
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
  }
  int fds[2] = {-1, -1};
};

TEST_CASE("busy poll: returns at once for a descriptor already readable") {
  Pipe p;
  REQUIRE(write(p.fds[1], "x", 1) == 1);
  auto t0 = Clock::now();
  CHECK(BusyPoll(p.fds[0], 10s));
  CHECK(Clock::now() - t0 < 1s);
}

TEST_CASE("busy poll: catches bytes that come within the budget") {
  Pipe p;
  std::atomic<bool> polling{false};
  std::thread writer([&] {
    while (!polling.load()) std::this_thread::yield();
    std::this_thread::sleep_for(2ms);  // comes while the poller is inside its budget
    (void)!write(p.fds[1], "x", 1);
  });
  polling = true;
  auto t0 = Clock::now();
  bool caught = BusyPoll(p.fds[0], 10s);
  auto took = Clock::now() - t0;
  writer.join();
  CHECK(caught);
  CHECK(took < 5s);  // woke for the byte, not at the end of the budget
  char c = 0;
  CHECK(read(p.fds[0], &c, 1) == 1);
  CHECK(c == 'x');
}

TEST_CASE("busy poll: gives up once the budget has passed") {
  Pipe p;
  auto t0 = Clock::now();
  CHECK_FALSE(BusyPoll(p.fds[0], 20ms));
  auto took = Clock::now() - t0;
  CHECK(took >= 20ms);
  CHECK(took < 5s);
  CHECK_FALSE(BusyPoll(p.fds[0], 0us));  // no budget: one look
}

TEST_CASE("busy poll: a closed peer ends the poll (the reader then sees the end)") {
  Pipe p;
  close(p.fds[1]);
  p.fds[1] = -1;
  CHECK(BusyPoll(p.fds[0], 10s));
  char c;
  CHECK(read(p.fds[0], &c, 1) == 0);
}

}  // namespace
}  // namespace kelp
