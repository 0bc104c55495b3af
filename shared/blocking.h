// Telling a thread's lender that the thread is about to block.
//
// A loop that runs a request on the thread that read it (the mount's FUSE device loop) must not
// stall while that request waits: it lends the thread with a BlockingListener, and code that
// is about to wait (a condition variable, an RPC's reply, an HTTP exchange) calls
// AboutToBlock() first, which tells the listener once so that it can let another thread read
// in the meantime. Without a listener it costs one thread-local load.
#pragma once

#include <poll.h>
#include <sched.h>

#include <chrono>

namespace kelp {

class BlockingListener {
 public:
  virtual ~BlockingListener() = default;
  // Runs on the lent thread, once, before its first wait; the listener is dropped first.
  virtual void OnBlocking() = 0;
  // A descriptor that turns readable when the lender has work for another thread (the FUSE
  // device), or -1. A wait on a socket watches it beside the socket and tells the lender only
  // when it fires first: a reply that comes first costs the lender nothing.
  virtual int WorkFd() const { return -1; }
};

namespace internal {
inline thread_local BlockingListener* t_blocking_listener = nullptr;
}  // namespace internal

// Lends the calling thread to listener until the next AboutToBlock() (or Lend(nullptr)).
inline void LendThread(BlockingListener* listener) { internal::t_blocking_listener = listener; }
// The listener the thread is still lent to: null once AboutToBlock() told it.
inline BlockingListener* ThreadLentTo() { return internal::t_blocking_listener; }

// Called before a wait that may be long.
inline void AboutToBlock() {
  if (BlockingListener* l = internal::t_blocking_listener) {
    internal::t_blocking_listener = nullptr;
    l->OnBlocking();
  }
}

// Waits up to timeout_ms for fd to turn readable, as a thread about to recv() from it: when
// the thread is lent, the lender's WorkFd() is watched too and the lender told (AboutToBlock)
// if it fires before fd does, or fd stays silent for timeout_ms; without a WorkFd the lender
// is told at once.
inline void AwaitReadable(int fd, int timeout_ms) {
  BlockingListener* l = internal::t_blocking_listener;
  if (l == nullptr) return;  // recv() itself waits
  pollfd p[2] = {{fd, POLLIN, 0}, {l->WorkFd(), POLLIN, 0}};
  if (p[1].fd < 0) {
    AboutToBlock();
    return;
  }
  int n = ::poll(p, 2, timeout_ms);
  if (n <= 0 || (p[0].revents == 0 && (p[1].revents & POLLIN) != 0)) AboutToBlock();
}

// Waits up to budget for fd to turn readable without sleeping: polls it, yielding between polls
// to threads runnable on the same CPU (sched_yield; threads queued on another CPU still wait). True
// when it turned readable (or failed: POLLERR, POLLHUP; or the poll was interrupted), false when
// the budget ran out and the caller is to sleep in its own read as before. Spends a little CPU to
// spare a thread whose next request comes right after its last reply the sleep and the wake-up in
// between, which is about a third of a round trip between two processes on a VM (docs/mount.md,
// "FUSE threads").
inline bool BusyPoll(int fd, std::chrono::microseconds budget) {
  const auto until = std::chrono::steady_clock::now() + budget;
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    if (::poll(&p, 1, 0) != 0) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    sched_yield();
  }
}

}  // namespace kelp
