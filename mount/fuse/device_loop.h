// DeviceLoop: the threads that read the FUSE device and run its requests.
//
// One thread at a time reads the device, and runs the request it read itself before it reads
// the next: a program's sequence of requests (a create's GETATTR, LOOKUP, CREATE, FLUSH,
// RELEASE) costs no thread switch in the mount beyond the device's own wake-ups. The device
// goes to another thread (an idle one woken, or one started, up to max_threads) when the
// request is about to block (a condition wait, a volume exchange: shared/blocking.h), or when
// it moves data and more requests wait, so requests still run in parallel; when other threads
// are running requests already, a request that moves data leaves the device to the first of
// them to come back rather than waking one more (one is woken if the request waits first). A
// filer RPC's reply is awaited with the device in view: the device passes on only if a
// request comes before the reply. libfuse's own loop has every idle thread read the device,
// and a close's RELEASE then runs on one thread beside the program's next request on another
// (docs/mount.md, "FUSE threads"). A request nobody waits for (Reader::Deferrable) that
// finds another already waiting runs right after that one, on the same thread: an nginx
// worker's next open does not wait behind the release of the file it just closed.
//
// Thread-safety: Run() from one thread; the device's Reader runs on the loop's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/blocking.h"
#include "shared/mutex.h"

namespace kelp::mount::fuse {

// What the loop reads: the FUSE session, or a queue in tests.
class RequestDevice {
 public:
  // One thread's buffer for one request.
  class Reader {
   public:
    virtual ~Reader() = default;
    // Blocks for the next request: > 0 when one came, 0 when the device ended (unmounted),
    // -EINTR or -EAGAIN to read again, another -errno when it failed.
    virtual int Read() = 0;
    // Whether the request Read() returned keeps a thread busy by itself (moves data: a read,
    // a write, a listing): it runs beside the others waiting, rather than before them.
    virtual bool Busy() const = 0;
    // Runs the request Read() returned.
    virtual void Run() = 0;
    // Whether the request Read() returned is one nobody waits for, that never waits itself
    // and may run after requests read later (the release of a file opened read-only).
    virtual bool Deferrable() const { return false; }
    // That request as a function of its own, holding a copy (the reader's buffer is reused):
    // only when Deferrable().
    virtual std::function<void()> TakeDeferred() { return {}; }
  };
  virtual ~RequestDevice() = default;
  virtual std::unique_ptr<Reader> NewReader() = 0;
  // Whether another request waits to be read (never blocks).
  virtual bool Pending() = 0;
  // A descriptor readable while a request waits, or -1 (shared/blocking.h, WorkFd).
  virtual int Fd() const { return -1; }
};

class DeviceLoop final : public BlockingListener {
 public:
  // busy_poll: how long the reading thread polls the device (Fd()) before it sleeps in Read()
  // for the next request (BusyPoll, shared/blocking.h); 0 = it sleeps at once. others_busy
  // (may be empty): true when other threads have work, and the reader then sleeps at once.
  DeviceLoop(RequestDevice* device, int max_threads,
             std::chrono::microseconds busy_poll = std::chrono::microseconds(0),
             std::function<bool()> others_busy = {});
  DeviceLoop(const DeviceLoop&) = delete;
  DeviceLoop& operator=(const DeviceLoop&) = delete;

  // Runs the loop on the calling thread and up to max_threads - 1 more; returns when the
  // device ended (0) or failed (-errno), after every request taken has finished.
  int Run();

  // Threads started so far (the caller's included).
  int threads() const;
  // Times the device went to another thread because a request was about to block.
  uint64_t handoffs() const;

 private:
  void Work();
  // Reads and runs requests while this thread has the device: 1 when it passed the device
  // on, else the device's end (0 or -errno).
  int ReadAndRun(RequestDevice::Reader& reader);
  // Lets another thread read: an idle one, or a new one. handoff: counted in handoffs() (the
  // request is about to block).
  void PassDevice(bool handoff = false);
  // True when an idle thread is to be woken (cv_.NotifyOne() once mu_ is let go, so the woken
  // thread finds it free).
  bool PassDeviceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets the first thread that comes back from a request read next.
  void FreeDevice();
  // Lets another thread read if none does: a thread that left the device free is about to
  // wait.
  void WakeIfFree();
  void OnBlocking() override;
  int WorkFd() const override { return device_->Fd(); }

  // Lent to a thread that left the device free (FreeDevice): if it is about to wait before
  // another thread came back to the device, one is woken for it.
  class FreedThread final : public BlockingListener {
   public:
    explicit FreedThread(DeviceLoop* loop) : loop_(loop) {}
    void OnBlocking() override { loop_->WakeIfFree(); }
    int WorkFd() const override { return loop_->WorkFd(); }

   private:
    DeviceLoop* const loop_;
  };

  RequestDevice* const device_;
  FreedThread freed_{this};
  const int max_threads_;
  const std::chrono::microseconds busy_poll_;
  const std::function<bool()> others_busy_;
  mutable Mutex mu_;
  CondVar cv_;
  bool taken_ ABSL_GUARDED_BY(mu_) =
      false;  // a thread reads, or runs a request meaning to read next
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  int error_ ABSL_GUARDED_BY(mu_) = 0;
  int threads_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t handoffs_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> started_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> running_{0};  // threads inside a request
};

}  // namespace kelp::mount::fuse
