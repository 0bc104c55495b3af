// DirtyBuffer: the bytes written to one file in this mount and not yet handed to an upload.
// Kept as sorted, non-overlapping, non-adjacent extents (adjacent writes merge), so sequential
// writers build one growing extent and random writers one extent per write. The file is cut
// into slots of slot_size bytes (-chunkSizeLimitMB); a slot that one extent covers completely
// is "full" and can be taken for a background upload as one chunk.
//
// Thread-safety: none; the owning FileData guards it with its mutex. SlotBufferPool is
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"

namespace kelp::mount {

// A run of file bytes [offset, offset + data.size()).
struct Extent {
  uint64_t offset = 0;
  std::string data;
  uint64_t end() const { return offset + data.size(); }
};

// Buffers of a slot's size, kept after their upload for the next stream to write into: memory
// the process has touched already, where a fresh 4 MiB allocation takes a page fault every 4
// KiB (5 % of the samples of the FUSE worker copying a 1 GiB sequential write, on a VM where a
// fault is a trap to the hypervisor). At most kMaxKeptBytes are kept; buffers under 1 MiB are
// not worth keeping.
class SlotBufferPool {
 public:
  static constexpr size_t kMaxKeptBytes = 32 << 20;
  static constexpr size_t kMinKept = 1 << 20;
  // An empty string with capacity >= size: a kept buffer when one is big enough.
  std::string Take(size_t size);
  // Keeps s (cleared) when it is big enough and there is room; frees it otherwise.
  void Give(std::string s);
  size_t kept_bytes() const;

 private:
  mutable Mutex mu_;
  std::vector<std::string> kept_ ABSL_GUARDED_BY(mu_);
  size_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

class DirtyBuffer {
 public:
  // pool (may be null): where an extent that starts a slot with a streaming write takes its
  // buffer.
  explicit DirtyBuffer(uint64_t slot_size, SlotBufferPool* pool = nullptr)
      : slot_size_(slot_size), pool_(pool) {}

  // Stores data at offset (newer bytes replace older ones). Returns how much the held byte
  // count grew (less than data.size() when it overwrote dirty bytes).
  uint64_t Write(uint64_t offset, std::string_view data);

  // Stores the parts of data at offset that no dirty byte covers (older bytes under newer
  // ones: a failed upload's extents going back). Returns how much the held byte count grew.
  uint64_t WriteUnder(uint64_t offset, std::string_view data);

  // Copies the dirty bytes of [offset, offset + len) into dst (dst[0] is file byte offset)
  // and calls covered(start, end) for each file range it copied, in order.
  void Overlay(uint64_t offset, uint64_t len, char* dst,
               const std::function<void(uint64_t, uint64_t)>& covered) const;

  // Drops every byte at or past size. Returns the bytes freed.
  uint64_t Truncate(uint64_t size);

  // Removes and returns the slots an extent covers completely, one extent per slot.
  std::vector<Extent> TakeFullSlots();
  // The same for the extent holding file byte offset only (the one a write just touched):
  // O(log n + slots taken), so a writer with many scattered extents does not scan them all.
  std::vector<Extent> TakeFullSlotsAt(uint64_t offset);
  // Removes and returns everything.
  std::vector<Extent> TakeAll();

  uint64_t bytes() const { return bytes_; }
  // Memory the extents hold, reserved room included: O(extents).
  uint64_t held_bytes() const;
  bool empty() const { return extents_.empty(); }
  size_t extent_count() const { return extents_.size(); }
  // One past the last dirty byte; 0 when empty.
  uint64_t end() const;
  uint64_t slot_size() const { return slot_size_; }

 private:
  uint64_t SlotStart(uint64_t off) const { return off / slot_size_ * slot_size_; }
  // Grows s to hold n bytes without doubling past the end of the slot the extent started in.
  void Reserve(std::string& s, uint64_t extent_start, size_t n) const;
  // Takes the full slots of the extent at it; returns the iterator after what remains of it.
  std::map<uint64_t, std::string>::iterator TakeFullSlotsOf(std::map<uint64_t, std::string>::iterator it,
                                                          std::vector<Extent>* out);

  // A write this big is taken for part of a stream: its extent gets the rest of its slot.
  static constexpr size_t kStreaming = 1 << 20;
  const uint64_t slot_size_;
  SlotBufferPool* const pool_;
  std::map<uint64_t, std::string> extents_;  // offset -> bytes
  uint64_t bytes_ = 0;
};

}  // namespace kelp::mount
