#include "mount/fuse/device_loop.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shared/blocking.h"
#include "shared/mutex.h"

namespace kelp::mount::fuse {
namespace {

using namespace std::chrono_literals;

// A device of queued requests: each a function, and whether it moves data (Busy). Its Fd() is
// an eventfd readable while a request waits, as the FUSE device's is.
class QueueDevice final : public RequestDevice {
 public:
  struct Request {
    std::function<void()> run;
    bool busy = false;
    bool deferrable = false;  // nobody waits for it (Deferrable)
  };

  QueueDevice() : efd_(eventfd(0, EFD_NONBLOCK)) {}
  ~QueueDevice() override { close(efd_); }

  void Push(std::function<void()> run, bool busy = false, bool deferrable = false) {
    MutexLock lock(mu_);
    queue_.push_back({std::move(run), busy, deferrable});
    Signal();
    cv_.NotifyAll();
  }
  // Ends the device: Read() answers end (0 or -errno) once the queue is empty.
  void End(int end) {
    MutexLock lock(mu_);
    ended_ = true;
    end_ = end;
    cv_.NotifyAll();
  }
  void set_watchable(bool on) { watchable_ = on; }

  std::unique_ptr<Reader> NewReader() override { return std::make_unique<QueueReader>(this); }
  bool Pending() override {
    MutexLock lock(mu_);
    return !queue_.empty();
  }
  int Fd() const override { return watchable_ ? efd_ : -1; }

 private:
  class QueueReader final : public Reader {
   public:
    explicit QueueReader(QueueDevice* d) : d_(d) {}
    int Read() override {
      MutexLock lock(d_->mu_);
      while (d_->queue_.empty() && !d_->ended_) d_->cv_.Wait(lock);
      if (d_->queue_.empty()) return d_->end_;
      req_ = std::move(d_->queue_.front());
      d_->queue_.pop_front();
      d_->Signal();
      return 1;
    }
    bool Busy() const override { return req_.busy; }
    void Run() override { req_.run(); }
    bool Deferrable() const override { return req_.deferrable; }
    std::function<void()> TakeDeferred() override { return std::move(req_.run); }

   private:
    QueueDevice* const d_;
    Request req_;
  };

  // The eventfd's count is 1 while the queue holds a request, 0 when it is empty.
  void Signal() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    uint64_t v;
    while (read(efd_, &v, sizeof v) == sizeof v) {
    }
    if (!queue_.empty()) {
      v = 1;
      if (write(efd_, &v, sizeof v) != sizeof v) std::abort();  // an eventfd of count 0 takes 1
    }
  }

  const int efd_;
  bool watchable_ = false;
  Mutex mu_;
  CondVar cv_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  int end_ ABSL_GUARDED_BY(mu_) = 0;
};

// A flag a test waits on with a deadline, without a CondVar (whose wait would pass the device).
bool SpinUntil(const std::atomic<bool>& flag, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// A DeviceLoop over a QueueDevice, run on a thread of its own from Start() on; Stop() ends the
// device and returns what Run() returned.
struct RunningLoop {
  explicit RunningLoop(int max_threads, std::chrono::microseconds busy_poll = 0us,
                       std::function<bool()> others_busy = {})
      : loop(&dev, max_threads, busy_poll, std::move(others_busy)) {}
  ~RunningLoop() {
    if (runner.joinable()) Stop(0);
  }
  void Start() {
    runner = std::thread([this] { rc = loop.Run(); });
  }
  int Stop(int end) {
    dev.End(end);
    runner.join();
    return rc;
  }

  QueueDevice dev;
  DeviceLoop loop;
  int rc = 1;
  std::thread runner;
};

TEST_CASE("device loop: requests that come one at a time run on the thread that read them") {
  // With busy polling the reader polls the device's descriptor before it sleeps in Read(),
  // unless others_busy says other threads have work.
  int busy_poll_us = GENERATE(0, 200);
  bool others_busy = GENERATE(false, true);
  CAPTURE(busy_poll_us, others_busy);
  std::atomic<int> asked{0};
  RunningLoop r(8, std::chrono::microseconds(busy_poll_us), [&] {
    asked.fetch_add(1);
    return others_busy;
  });
  r.dev.set_watchable(busy_poll_us > 0);
  r.Start();
  Mutex mu;
  std::set<std::thread::id> ran_on;
  for (int i = 0; i < 50; ++i) {
    std::atomic<bool> done{false};
    r.dev.Push([&] {
      {
        MutexLock lock(mu);
        ran_on.insert(std::this_thread::get_id());
      }
      done = true;
    });
    REQUIRE(SpinUntil(done));
  }
  CHECK(r.Stop(0) == 0);
  CHECK(ran_on.size() == 1);
  CHECK(r.loop.threads() == 1);
  CHECK(r.loop.handoffs() == 0);
  CHECK((asked.load() > 0) == (busy_poll_us > 0));  // asked before each poll, only when polling
}

TEST_CASE("device loop: a request that waits lets the next one run on another thread") {
  RunningLoop r(8);
  r.Start();
  Mutex mu;
  CondVar cv;
  bool second_ran = false;
  std::atomic<bool> first_waits{false}, first_done{false}, first_saw_second{false};
  r.dev.Push([&] {
    MutexLock lock(mu);
    first_waits = true;
    auto end = std::chrono::steady_clock::now() + 10s;
    while (!second_ran && std::chrono::steady_clock::now() < end) cv.WaitUntil(lock, end);
    first_saw_second = second_ran;
    first_done = true;
  });
  REQUIRE(SpinUntil(first_waits));
  r.dev.Push([&] {
    MutexLock lock(mu);
    second_ran = true;
    cv.NotifyAll();
  });
  REQUIRE(SpinUntil(first_done));
  CHECK(first_saw_second);  // without the hand-off the first waited out its 10 s alone
  CHECK(r.Stop(0) == 0);
  CHECK(r.loop.threads() == 2);
  CHECK(r.loop.handoffs() == 1);
}

TEST_CASE("device loop: a request moving data runs beside the others waiting") {
  RunningLoop r(8);
  std::atomic<bool> a_started{false}, b_started{false}, a_saw_b{false}, b_saw_a{false};
  // Neither request waits on anything that would pass the device: only the busy hand-off at
  // the read lets the two run at once.
  r.dev.Push(
      [&] {
        a_started = true;
        a_saw_b = SpinUntil(b_started, 5s);
      },
      true);
  r.dev.Push(
      [&] {
        b_started = true;
        b_saw_a = SpinUntil(a_started, 5s);
      },
      true);
  r.Start();
  REQUIRE(SpinUntil(a_started));
  REQUIRE(SpinUntil(b_started));
  CHECK(r.Stop(0) == 0);
  CHECK(a_saw_b);
  CHECK(b_saw_a);
  CHECK(r.loop.handoffs() == 0);
}

TEST_CASE("device loop: a data request left to the others lets another thread read when it waits") {
  RunningLoop r(8);
  r.Start();
  Mutex mu;
  CondVar cv;
  bool x_waits = false, y_waits = false, z_ran = false, release_x = false;
  auto wait_for = [&](bool& flag) {
    MutexLock lock(mu);
    auto end = std::chrono::steady_clock::now() + 10s;
    while (!flag && std::chrono::steady_clock::now() < end) cv.WaitUntil(lock, end);
    return flag;
  };
  auto set = [&](bool& flag) {
    MutexLock lock(mu);
    flag = true;
    cv.NotifyAll();
  };
  // X runs (and waits) on one thread, so the data request Y that comes next leaves the device
  // to "the first thread to come back"; when Y waits too, nobody would read Z.
  r.dev.Push([&] {
    set(x_waits);
    wait_for(release_x);
  });
  REQUIRE(wait_for(x_waits));
  std::atomic<bool> y_saw_z{false};
  r.dev.Push(
      [&] {
        set(y_waits);
        y_saw_z = wait_for(z_ran);
      },
      true);
  REQUIRE(wait_for(y_waits));
  r.dev.Push([&] { set(z_ran); });
  CHECK(wait_for(z_ran));
  set(release_x);
  CHECK(r.Stop(0) == 0);
  CHECK(y_saw_z);
}

TEST_CASE(
    "device loop: a lent thread waiting on a socket passes the device only when a request comes "
    "first") {
  RunningLoop r(8);
  r.dev.set_watchable(true);
  r.Start();
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);

  // The reply is there before the wait: the thread keeps the device.
  std::atomic<bool> done{false};
  REQUIRE(write(sv[1], "x", 1) == 1);
  r.dev.Push([&] {
    AwaitReadable(sv[0], 5000);
    char c;
    if (read(sv[0], &c, 1) == 1) done = true;
  });
  REQUIRE(SpinUntil(done));
  CHECK(r.loop.handoffs() == 0);

  // A request comes while the first waits for its reply: the device passes, and the second
  // request (which sends the reply) runs.
  std::atomic<bool> waiting{false}, got{false};
  r.dev.Push([&] {
    waiting = true;
    AwaitReadable(sv[0], 5000);  // as the RPC client before its recv()
    char c;
    if (recv(sv[0], &c, 1, 0) != 1) return;
    got = true;
  });
  REQUIRE(SpinUntil(waiting));
  r.dev.Push([&] {
    if (write(sv[1], "y", 1) != 1) std::abort();
  });
  REQUIRE(SpinUntil(got));
  CHECK(r.loop.handoffs() == 1);
  CHECK(r.Stop(0) == 0);
  close(sv[0]);
  close(sv[1]);
}

TEST_CASE("device loop: threads stop at max_threads and the loop returns the device's error") {
  RunningLoop r(2);
  Mutex mu;
  CondVar cv;
  int waiting = 0;
  bool release = false;
  std::atomic<int> finished{0};
  auto blocker = [&] {
    MutexLock lock(mu);
    ++waiting;
    cv.NotifyAll();
    auto end = std::chrono::steady_clock::now() + 10s;  // bounded, should the test fail first
    while (!release && std::chrono::steady_clock::now() < end) cv.WaitUntil(lock, end);
    ++finished;
  };
  r.Start();
  for (int i = 0; i < 3; ++i) r.dev.Push(blocker);
  {
    // Two run; the third waits for a thread, as the FUSE device's requests would.
    MutexLock lock(mu);
    auto end = std::chrono::steady_clock::now() + 10s;
    while (waiting < 2 && std::chrono::steady_clock::now() < end) cv.WaitUntil(lock, end);
    REQUIRE(waiting == 2);
    cv.WaitFor(lock, 100ms);  // a window for a third thread, which must not come
    CHECK(waiting == 2);
    release = true;
    cv.NotifyAll();
  }
  CHECK(r.Stop(-EIO) == -EIO);
  CHECK(finished == 3);  // every request taken ran before Run() returned
  CHECK(r.loop.threads() == 2);
}

TEST_CASE("device loop: a request nobody waits for runs after the ones already waiting") {
  RunningLoop r(8);
  Mutex mu;
  std::vector<std::string> order;
  std::set<std::thread::id> ran_on;
  auto note = [&](const char* what) {
    MutexLock lock(mu);
    order.push_back(what);
    ran_on.insert(std::this_thread::get_id());
  };
  // Both queued before the loop starts: the first finds the second waiting.
  r.dev.Push([&] { note("release"); }, false, true);
  std::atomic<bool> open_ran{false};
  r.dev.Push([&] {
    note("open");
    open_ran = true;
  });
  r.Start();
  REQUIRE(SpinUntil(open_ran));
  // Alone, it runs at once; and the one put off ran before the loop went back to waiting.
  std::atomic<bool> alone_ran{false};
  r.dev.Push(
      [&] {
        note("alone");
        alone_ran = true;
      },
      false, true);
  REQUIRE(SpinUntil(alone_ran));
  // Two in a row: the first finds only the second waiting, and still runs before the loop
  // goes back to waiting.
  std::atomic<bool> second_ran{false};
  r.dev.Push([&] { note("first"); }, false, true);
  r.dev.Push(
      [&] {
        note("second");
        second_ran = true;
      },
      false, true);
  REQUIRE(SpinUntil(second_ran));
  {
    MutexLock lock(mu);
    CHECK(order.size() == 5);  // "first" ran before "second" set the flag
  }
  CHECK(r.Stop(0) == 0);
  MutexLock lock(mu);
  CHECK(order == std::vector<std::string>{"open", "release", "alone", "first", "second"});
  CHECK(ran_on.size() == 1);  // on the reading thread: no thread woken for it
}

}  // namespace
}  // namespace kelp::mount::fuse
