// The small tier's RAM layer: whole small blobs, held as shared_ptr so a reader copies its
// bytes out after dropping the lock. It is a copy of the hottest part of the small tier, on top
// of (not instead of) the disk copy, bounded by CacheOptions::memory_bytes. Data here was
// checksummed on its way in (verified disk read, or fresh from the network), so reads do not
// re-hash it.
//
// Thread-safety: every method may be called from any thread concurrently. mu_ guards the map
// and the policy and is held only for hash-map and list operations, never for copying data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "mount/cache/eviction_policy.h"
#include "shared/mutex.h"

namespace kelp::mount::cache {

class MemoryLayer {
 public:
  MemoryLayer(uint64_t capacity_bytes, EvictionKind eviction);

  // Copies [offset, offset + len) of block (fid, block_offset) into dst if it is held.
  bool Read(uint64_t key, std::string_view fid, uint64_t block_offset, uint64_t offset, size_t len,
            char* dst);
  // Holds data for the block unless it is already there or not Admits(). True if it now does.
  bool Insert(uint64_t key, std::string_view fid, uint64_t block_offset,
              std::shared_ptr<const std::string> data);

  // Drops block (fid, block_offset) if it is held.
  void Erase(uint64_t key, std::string_view fid, uint64_t block_offset);

  // Whether a block of this many bytes may be held: at most an eighth of the layer, so one
  // entry never flushes it.
  bool Admits(uint64_t bytes) const { return bytes + kItemOverhead <= capacity_ / 8; }
  uint64_t capacity() const { return capacity_; }
  uint64_t bytes() const;
  size_t entries() const;

 private:
  // Map node, policy node, strings' heap headers: roughly what an item costs beyond its data.
  static constexpr uint64_t kItemOverhead = 160;

  struct Item {
    std::string fid;
    uint64_t block_offset;
    std::shared_ptr<const std::string> data;
    uint64_t charge;  // data + bookkeeping
  };

  const uint64_t capacity_;
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, Item> items_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EvictionPolicy> policy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kelp::mount::cache
