// The client of the call a thread is running: the id its connection's upgrade request named
// (Kelp-Client, shared/rpc/frame.h). rpc::Server sets it around every handler; code below the
// handlers reads it to label what a call changed (the filer stamps its events with it, so a
// subscriber can leave out its own changes: docs/rpc-protocol.md, "Streams").
#pragma once

#include <cstdint>

namespace kelp::rpc {

namespace internal {
inline thread_local uint64_t caller_id = 0;
}  // namespace internal

// 0 outside a call, or when the client named no id.
inline uint64_t CallerId() { return internal::caller_id; }

// Sets this thread's caller id for its lifetime (the previous one comes back after).
class ScopedCallerId {
 public:
  explicit ScopedCallerId(uint64_t id) : prev_(internal::caller_id) { internal::caller_id = id; }
  ~ScopedCallerId() { internal::caller_id = prev_; }
  ScopedCallerId(const ScopedCallerId&) = delete;
  ScopedCallerId& operator=(const ScopedCallerId&) = delete;

 private:
  uint64_t prev_;
};

}  // namespace kelp::rpc
