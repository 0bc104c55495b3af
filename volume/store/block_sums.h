// Sums of the 64 KiB blocks of needles, so that a ranged read checks only the blocks it
// covers (docs/needle-format.md, "Ranged reads").
//
// A needle's single checksum covers all its data: without these sums, a 16 KiB read of a
// 4 MiB blob would read and hash 4 MiB. A needle written by this process gets its sums from
// the bytes written; any other (found at startup, or whose sums were dropped) gets them on its
// first ranged read, which verifies it whole and takes a sum per block in the same pass. Later
// ranged reads read their blocks back from the file and compare them with those sums: damage
// made after the sums were taken is caught by the block it lies in.
//
// Threads: every method is thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/mutex.h"
#include "volume/store/env.h"
#include "volume/store/needle.h"

namespace kelp::volume {

class BlockSums {
 public:
  static constexpr uint64_t kBlockSize = 64 << 10;
  // Needles at least this large are read by range and have sums; smaller ones are read whole.
  static constexpr uint64_t kMinNeedle = 2 * kBlockSize;

  struct Entry {
    // The needle's place: a vacuum copies it into another file, an overwrite appends another.
    std::weak_ptr<File> file;
    uint64_t offset = 0;
    NeedleHeader header;
    uint64_t checksum = 0;
    uint64_t append_time_ns = 0;
    std::vector<uint64_t> blocks;  // xxHash3-64 of each kBlockSize block of the data
  };

  // Appends the sum of each kBlockSize block of data (the last may be short) to blocks. data
  // must start on a block boundary of the needle.
  static void TakeSums(std::string_view data, std::vector<uint64_t>* blocks);

  // Keeps entries while their sums take at most max_bytes. Two segments: sums taken at a
  // write wait in a probation segment of at most a quarter of that (the oldest written go
  // first), so that a stream of writes never pushes out the sums of needles being read; a read
  // (Find) moves an entry to the main segment, where the least recently used go first.
  explicit BlockSums(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The entry of needle key if it was taken at the same place (file, offset), or null.
  std::shared_ptr<const Entry> Find(uint64_t key, const File* file, uint64_t offset);
  // Sums taken by reading the needle (main segment).
  void Put(uint64_t key, std::shared_ptr<const Entry> entry) { Insert(key, std::move(entry), false); }
  // Sums taken from the bytes written (probation segment).
  void PutWritten(uint64_t key, std::shared_ptr<const Entry> entry) { Insert(key, std::move(entry), true); }
  void Erase(uint64_t key);

  size_t entries() const;
  size_t probation_entries() const;

 private:
  struct Slot {
    std::shared_ptr<const Entry> entry;
    bool probation = false;
    std::list<uint64_t>::iterator pos;  // in main_ or probation_
  };
  static size_t Cost(const Entry& e) { return sizeof(Entry) + e.blocks.size() * sizeof(uint64_t); }
  void Insert(uint64_t key, std::shared_ptr<const Entry> entry, bool probation);
  void EraseLocked(uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  mutable Mutex mu_;
  std::list<uint64_t> main_ ABSL_GUARDED_BY(mu_);       // most recent first
  std::list<uint64_t> probation_ ABSL_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<uint64_t, Slot> map_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;            // both segments
  size_t probation_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kelp::volume
