// The in-memory needle index of one volume: key -> (offset, size), about 16 bytes per needle.
//
// Keys handed out by the filer grow with time, so nearly every insert lands past the largest
// key: those go to the end of a sorted array kept in fixed-size blocks (no doubling slack, no
// per-entry allocation). Keys that arrive out of order go to a small overflow b-tree, merged
// into the array once it grows past 1/8 of it, so lookups stay two binary searches.
// Deleted keys stay as tombstone entries until vacuum rebuilds the map.
//
// Threads: not thread-safe. Volume guards its map with a reader/writer lock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/btree_map.h"
#include "volume/store/needle_format.h"

namespace kelp::volume {

class CompactMap {
 public:
  struct Value {
    uint32_t offset_units = 0;  // needle offset / format::kAlignment
    uint32_t size = 0;          // data bytes, or format::kTombstoneSize when deleted
    bool deleted() const { return size == format::kTombstoneSize; }
  };

  CompactMap() = default;
  CompactMap(CompactMap&&) = default;
  CompactMap& operator=(CompactMap&&) = default;

  // Inserts or replaces; returns the previous value (live or tombstone) if the key was known.
  std::optional<Value> Set(uint64_t key, Value v);
  // The value of key, tombstones included.
  std::optional<Value> Get(uint64_t key) const;
  // Marks key deleted (a tombstone at offset_units); returns the previous value if it was live.
  std::optional<Value> Delete(uint64_t key, uint32_t offset_units);

  size_t entries() const { return count_ + overflow_.size(); }  // tombstones included
  // Bytes held by the map (blocks and overflow, approximate for the latter).
  size_t MemoryBytes() const;

  // Calls fn(key, value) for every entry, tombstones included, in ascending key order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    auto ov = overflow_.begin();
    for (size_t i = 0; i < count_; ++i) {
      const Entry& e = At(i);
      for (; ov != overflow_.end() && ov->first < e.key; ++ov) fn(ov->first, ov->second);
      fn(e.key, Value{e.offset_units, e.size});
    }
    for (; ov != overflow_.end(); ++ov) fn(ov->first, ov->second);
  }

 private:
  struct Entry {
    uint64_t key;
    uint32_t offset_units;
    uint32_t size;
  };
  static_assert(sizeof(Entry) == 16);
  static constexpr size_t kBlockShift = 12;
  static constexpr size_t kBlockEntries = size_t{1} << kBlockShift;  // 64 KiB blocks

  Entry& At(size_t i) { return blocks_[i >> kBlockShift][i & (kBlockEntries - 1)]; }
  const Entry& At(size_t i) const { return blocks_[i >> kBlockShift][i & (kBlockEntries - 1)]; }
  Entry* Find(uint64_t key);
  const Entry* Find(uint64_t key) const { return const_cast<CompactMap*>(this)->Find(key); }
  void Append(const Entry& e);
  void MergeOverflow();

  std::vector<std::unique_ptr<Entry[]>> blocks_;
  size_t count_ = 0;  // entries in blocks_, sorted by key
  absl::btree_map<uint64_t, Value> overflow_;
};

}  // namespace kelp::volume
