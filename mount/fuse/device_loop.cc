#include "mount/fuse/device_loop.h"

#include <cerrno>
#include <utility>
#include <vector>

namespace kelp::mount::fuse {
namespace {

// Requests a thread puts off behind waiting ones at most (ReadAndRun).
constexpr size_t kMaxDeferred = 64;

}  // namespace

DeviceLoop::DeviceLoop(RequestDevice* device, int max_threads, std::chrono::microseconds busy_poll,
                       std::function<bool()> others_busy)
    : device_(device),
      max_threads_(max_threads < 1 ? 1 : max_threads),
      busy_poll_(busy_poll),
      others_busy_(std::move(others_busy)) {}

int DeviceLoop::Run() {
  {
    MutexLock lock(mu_);
    ++threads_;
  }
  Work();
  std::vector<std::thread> started;
  {
    MutexLock lock(mu_);
    started = std::move(started_);  // done_ is set: no thread starts after this
  }
  for (auto& t : started) t.join();
  MutexLock lock(mu_);
  return error_;
}

void DeviceLoop::Work() {
  std::unique_ptr<RequestDevice::Reader> reader = device_->NewReader();
  MutexLock lock(mu_);
  for (;;) {
    while (taken_ && !done_) {
      ++idle_;
      cv_.Wait(lock);
      --idle_;
    }
    if (done_) return;
    taken_ = true;
    lock.Unlock();
    int end = ReadAndRun(*reader);
    lock.Lock();
    if (end <= 0) {
      done_ = true;
      if (end < 0 && error_ == 0) error_ = end;
      cv_.NotifyAll();
      return;
    }
  }
}

int DeviceLoop::ReadAndRun(RequestDevice::Reader& reader) {
  // Requests put off behind one that was waiting; run right after it.
  std::vector<std::function<void()>> deferred;
  auto run_deferred = [&] {
    for (auto& run : deferred) run();
    deferred.clear();
  };
  const int fd = busy_poll_.count() > 0 ? device_->Fd() : -1;
  for (;;) {
    // A program's next request (a create's LOOKUP after its GETATTR, its FLUSH after the
    // CREATE) usually comes within microseconds of the reply: caught here, the thread neither
    // sleeps nor is woken for it. Not while other threads have work: on a machine with few
    // CPUs the poll would take one from them (a CPU that polls is not idle, so the threads
    // woken meanwhile queue on the program's), and unlinks behind went 40 % slower so.
    if (fd >= 0 && !(others_busy_ && others_busy_())) BusyPoll(fd, busy_poll_);
    int n = reader.Read();
    if (n == -EINTR || n == -EAGAIN) continue;
    if (n <= 0) {
      run_deferred();
      return n;
    }
    if (reader.Deferrable()) {
      // It never waits (a read-only file's release): run here, unlent, now or after the
      // requests already waiting.
      if (deferred.size() < kMaxDeferred && device_->Pending()) {
        deferred.push_back(reader.TakeDeferred());
      } else {
        run_deferred();  // what was waiting were more of these: in order, before the wait
        reader.Run();
      }
      continue;
    }
    BlockingListener* lent = this;  // run it here; a wait inside passes the device on
    if (reader.Busy() && running_.load(std::memory_order_relaxed) > 0) {
      // Others run requests too: the first of them to come back reads next (or another
      // thread, should this one wait first: freed_).
      FreeDevice();
      lent = &freed_;
    } else if (reader.Busy() && device_->Pending()) {
      PassDevice();  // a second thread reads at once
      lent = nullptr;
    }
    LendThread(lent);
    running_.fetch_add(1, std::memory_order_relaxed);
    reader.Run();
    running_.fetch_sub(1, std::memory_order_relaxed);
    bool still_own = lent == this && ThreadLentTo() == this;
    LendThread(nullptr);
    run_deferred();
    if (!still_own) return 1;  // the device went to another thread
  }
}

void DeviceLoop::OnBlocking() { PassDevice(/*handoff=*/true); }

void DeviceLoop::FreeDevice() {
  MutexLock lock(mu_);
  taken_ = false;
}

void DeviceLoop::WakeIfFree() {
  bool wake;
  {
    MutexLock lock(mu_);
    if (taken_) return;  // a thread came back and reads
    ++handoffs_;
    wake = PassDeviceLocked();
  }
  if (wake) cv_.NotifyOne();
}

void DeviceLoop::PassDevice(bool handoff) {
  bool wake;
  {
    MutexLock lock(mu_);
    if (handoff) ++handoffs_;
    wake = PassDeviceLocked();
  }
  if (wake) cv_.NotifyOne();
}

bool DeviceLoop::PassDeviceLocked() {
  taken_ = false;
  if (done_) return false;
  if (idle_ > 0) return true;
  if (threads_ < max_threads_) {
    ++threads_;
    started_.emplace_back([this] { Work(); });
  }
  // Else every thread is busy: the first to finish reads next.
  return false;
}

int DeviceLoop::threads() const {
  MutexLock lock(mu_);
  return threads_;
}

uint64_t DeviceLoop::handoffs() const {
  MutexLock lock(mu_);
  return handoffs_;
}

}  // namespace kelp::mount::fuse
