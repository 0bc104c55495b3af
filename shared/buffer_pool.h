// BufferPool: raw byte buffers, not zeroed, that callers give back for the next Take to reuse.
//
// A large buffer allocated afresh is mapped afresh, so each of its pages is a fault at its first
// touch (a trap to the hypervisor on a VM), and a zero-filled one (a resized std::string) is
// written once more before use: a stream that takes a 4 MiB buffer per request pays both every
// time. Buffers between min_size and max_size bytes are kept, at most max_kept of them; others
// are freed when given back. (The mount's dirty buffers keep std::strings instead, which they
// append to: mount/core/dirty_buffer.h, SlotBufferPool.)
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp {

class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<char[]> data;
    size_t capacity = 0;
    char* get() const { return data.get(); }
    explicit operator bool() const { return data != nullptr; }
  };

  BufferPool(size_t max_kept, size_t min_size, size_t max_size)
      : max_kept_(max_kept), min_size_(min_size), max_size_(max_size) {}

  // A buffer of at least n bytes, not zeroed: a kept one when one is large enough.
  Buffer Take(size_t n) {
    if (n >= min_size_ && n <= max_size_) {
      MutexLock lock(mu_);
      for (size_t i = kept_.size(); i-- > 0;) {
        if (kept_[i].capacity < n) continue;
        Buffer b = std::move(kept_[i]);
        kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
        return b;
      }
    }
    return Buffer{std::make_unique_for_overwrite<char[]>(n), n};
  }

  // Keeps b for a later Take when its size is in range and there is room; frees it otherwise.
  void Give(Buffer b) {
    if (!b || b.capacity < min_size_ || b.capacity > max_size_) return;
    MutexLock lock(mu_);
    if (kept_.size() < max_kept_) kept_.push_back(std::move(b));
  }

  size_t kept() {
    MutexLock lock(mu_);
    return kept_.size();
  }

 private:
  const size_t max_kept_, min_size_, max_size_;
  Mutex mu_;  // a leaf
  std::vector<Buffer> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp
