// ReadPattern: tells a sequential reader from a random one, per open handle, from the offsets
// and lengths of its reads.
//
// A reader becomes sequential after reads that start exactly where an earlier one ended (the
// last few ends are kept: the kernel's read-ahead sends several reads at once and FUSE threads
// may deliver them out of order). Once sequential it stays so while its reads land within
// kSlack of the furthest end; a jump further away starts over. Closeness alone never makes a
// reader sequential: random 16 KiB reads of an 8 MiB file land near each other half the time,
// and each one mistaken for a stream would fetch a whole read-ahead window.
//
// Thread-safety: none; the caller serialises calls (FileHandle::mu).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kelp::mount {

class ReadPattern {
 public:
  static constexpr uint64_t kSlack = 2 << 20;
  // Contiguous reads needed before read-ahead starts.
  static constexpr int kRunToStream = 2;

  // Records a read of [offset, offset + len); returns true when the reader streams.
  bool OnRead(uint64_t offset, uint64_t len) {
    bool contiguous = offset == 0 ? furthest_ == 0 : IsRecentEnd(offset);
    bool near = offset + kSlack >= furthest_ && offset <= furthest_ + kSlack;
    if (contiguous) {
      ++run_;
    } else if (!(near && run_ >= kRunToStream)) {
      run_ = 0;
    }
    uint64_t end = offset + len;
    ends_[next_++ % ends_.size()] = end;
    furthest_ = near || contiguous ? (end > furthest_ ? end : furthest_) : end;
    return run_ >= kRunToStream;
  }

 private:
  bool IsRecentEnd(uint64_t offset) const {
    for (uint64_t e : ends_) {
      if (e == offset) return true;
    }
    return false;
  }

  std::array<uint64_t, 8> ends_{};  // 0 = empty (a read never ends at 0)
  size_t next_ = 0;
  uint64_t furthest_ = 0;
  int run_ = 0;
};

}  // namespace kelp::mount
