#include "volume/store/compact_map.h"

#include <algorithm>

namespace kelp::volume {

CompactMap::Entry* CompactMap::Find(uint64_t key) {
  size_t lo = 0, hi = count_;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (At(mid).key < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < count_ && At(lo).key == key) return &At(lo);
  return nullptr;
}

void CompactMap::Append(const Entry& e) {
  if ((count_ >> kBlockShift) == blocks_.size()) {
    blocks_.push_back(std::make_unique_for_overwrite<Entry[]>(kBlockEntries));
  }
  At(count_) = e;
  ++count_;
}

std::optional<CompactMap::Value> CompactMap::Set(uint64_t key, Value v) {
  if (count_ == 0 || At(count_ - 1).key < key) {
    // Overflow keys are all below the largest array key, so this key is new.
    Append(Entry{key, v.offset_units, v.size});
    return std::nullopt;
  }
  if (Entry* e = Find(key)) {
    Value old{e->offset_units, e->size};
    e->offset_units = v.offset_units;
    e->size = v.size;
    return old;
  }
  auto [it, inserted] = overflow_.try_emplace(key, v);
  if (!inserted) {
    Value old = it->second;
    it->second = v;
    return old;
  }
  if (overflow_.size() > std::max(kBlockEntries, count_ / 8)) MergeOverflow();
  return std::nullopt;
}

std::optional<CompactMap::Value> CompactMap::Get(uint64_t key) const {
  if (const Entry* e = Find(key)) return Value{e->offset_units, e->size};
  if (!overflow_.empty()) {
    auto it = overflow_.find(key);
    if (it != overflow_.end()) return it->second;
  }
  return std::nullopt;
}

std::optional<CompactMap::Value> CompactMap::Delete(uint64_t key, uint32_t offset_units) {
  Value tomb{offset_units, format::kTombstoneSize};
  if (Entry* e = Find(key)) {
    Value old{e->offset_units, e->size};
    e->offset_units = tomb.offset_units;
    e->size = tomb.size;
    return old.deleted() ? std::nullopt : std::optional<Value>(old);
  }
  auto it = overflow_.find(key);
  if (it == overflow_.end()) return std::nullopt;
  Value old = it->second;
  it->second = tomb;
  return old.deleted() ? std::nullopt : std::optional<Value>(old);
}

void CompactMap::MergeOverflow() {
  std::vector<std::unique_ptr<Entry[]>> old_blocks;
  old_blocks.swap(blocks_);
  size_t old_count = count_;
  count_ = 0;
  auto old_at = [&](size_t i) -> const Entry& {
    return old_blocks[i >> kBlockShift][i & (kBlockEntries - 1)];
  };
  auto ov = overflow_.begin();
  for (size_t i = 0; i < old_count; ++i) {
    const Entry& e = old_at(i);
    for (; ov != overflow_.end() && ov->first < e.key; ++ov) {
      Append(Entry{ov->first, ov->second.offset_units, ov->second.size});
    }
    Append(e);
    // Free each old block as soon as it is copied, so a merge needs one block of slack.
    if (((i + 1) & (kBlockEntries - 1)) == 0) old_blocks[i >> kBlockShift].reset();
  }
  for (; ov != overflow_.end(); ++ov)
    Append(Entry{ov->first, ov->second.offset_units, ov->second.size});
  overflow_.clear();
}

size_t CompactMap::MemoryBytes() const {
  // A b-tree node holds a few dozen 16-byte slots; 24 bytes per entry is a fair estimate.
  return blocks_.size() * kBlockEntries * sizeof(Entry) + overflow_.size() * 24 +
         blocks_.capacity() * sizeof(void*);
}

}  // namespace kelp::volume
