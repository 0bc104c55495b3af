#include "mount/core/dirty_buffer.h"

#include <vector>

#include <algorithm>
#include <cstring>
#include <iterator>

namespace kelp::mount {

std::string SlotBufferPool::Take(size_t size) {
  MutexLock lock(mu_);
  for (size_t i = kept_.size(); i-- > 0;) {
    if (kept_[i].capacity() < size) continue;
    std::string s = std::move(kept_[i]);
    kept_.erase(kept_.begin() + static_cast<ptrdiff_t>(i));
    kept_bytes_ -= s.capacity();
    return s;
  }
  return {};
}

void SlotBufferPool::Give(std::string s) {
  if (s.capacity() < kMinKept) return;
  s.clear();
  MutexLock lock(mu_);
  if (kept_bytes_ + s.capacity() > kMaxKeptBytes) return;  // s is freed after the lock goes
  kept_bytes_ += s.capacity();
  kept_.push_back(std::move(s));
}

size_t SlotBufferPool::kept_bytes() const {
  MutexLock lock(mu_);
  return kept_bytes_;
}

void DirtyBuffer::Reserve(std::string& s, uint64_t extent_start, size_t n) const {
  if (n <= s.capacity()) return;
  uint64_t slot_end = SlotStart(extent_start) + slot_size_;
  size_t to_slot_end = slot_end > extent_start ? slot_end - extent_start : 0;
  // An extent that holds a streaming writer's MiB, or starts a slot with one, gets the rest of
  // its slot at once (doubling from 1 MiB copied 3 MiB more for every 4 MiB slot); others
  // double, up to the slot, so that scattered writes never hold much more than they wrote.
  const bool streaming =
      s.size() >= kStreaming || (n >= kStreaming && extent_start == SlotStart(extent_start));
  size_t want = streaming ? std::max<size_t>(n, to_slot_end)
                          : std::max<size_t>(n, std::min<size_t>(2 * s.capacity(),
                                                                 std::max<size_t>(n, to_slot_end)));
  s.reserve(want);
}

uint64_t DirtyBuffer::held_bytes() const {
  uint64_t held = 0;
  for (const auto& [start, data] : extents_) held += data.capacity();
  return held;
}

uint64_t DirtyBuffer::WriteUnder(uint64_t offset, std::string_view data) {
  const uint64_t end = offset + data.size();
  // The gaps first: Write changes the extents.
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  uint64_t pos = offset;
  auto it = extents_.upper_bound(offset);
  if (it != extents_.begin()) --it;
  for (; it != extents_.end() && it->first < end && pos < end; ++it) {
    uint64_t s = it->first, e = s + it->second.size();
    if (e <= pos) continue;
    if (s > pos) gaps.emplace_back(pos, s);
    pos = std::max(pos, e);
  }
  if (pos < end) gaps.emplace_back(pos, end);
  uint64_t grew = 0;
  for (auto [s, e] : gaps) grew += Write(s, data.substr(s - offset, e - s));
  return grew;
}

uint64_t DirtyBuffer::Write(uint64_t offset, std::string_view data) {
  if (data.empty()) return 0;
  uint64_t end = offset + data.size();
  uint64_t before = bytes_;

  // Fast path: appending to the extent that ends exactly at offset, with nothing after it.
  auto it = extents_.upper_bound(offset);
  if (it != extents_.begin()) {
    auto prev = std::prev(it);
    uint64_t pend = prev->first + prev->second.size();
    if (pend == offset && (it == extents_.end() || it->first > end)) {
      Reserve(prev->second, prev->first, prev->second.size() + data.size());
      prev->second.append(data);
      bytes_ += data.size();
      return bytes_ - before;
    }
    if (prev->first <= offset && pend >= end) {  // entirely inside one extent: overwrite
      std::memcpy(prev->second.data() + (offset - prev->first), data.data(), data.size());
      return 0;
    }
  }

  // General case: merge every extent that overlaps or touches [offset, end).
  uint64_t new_start = offset, new_end = end;
  auto first = extents_.lower_bound(offset);
  if (first != extents_.begin()) {
    auto prev = std::prev(first);
    if (prev->first + prev->second.size() >= offset) first = prev;
  }
  auto last = first;
  while (last != extents_.end() && last->first <= end) {
    new_start = std::min(new_start, last->first);
    new_end = std::max<uint64_t>(new_end, last->first + last->second.size());
    ++last;
  }
  std::string merged;
  if (first == last) {
    // Touches nothing: a new extent, its bytes copied once (a resize would zero them first;
    // sysbench's random 16 KiB writes spent 1 % of the mount's CPU there). A stream starting a
    // slot writes into a kept buffer.
    if (pool_ != nullptr && offset == SlotStart(offset) && data.size() >= kStreaming) {
      merged = pool_->Take(slot_size_);
    }
    Reserve(merged, offset, data.size());
    merged.append(data);
    bytes_ += data.size();
    extents_.emplace(offset, std::move(merged));
    return data.size();
  }
  if (first->first == new_start) {
    merged = std::move(first->second);  // reuse the leftmost buffer
  }
  Reserve(merged, new_start, new_end - new_start);
  for (auto i = first; i != last; ++i) {
    bytes_ -= (i == first && merged.size() > 0) ? merged.size() : i->second.size();
    if (i == first && !merged.empty()) continue;
    uint64_t rel = i->first - new_start;
    if (merged.size() < rel + i->second.size()) merged.resize(rel + i->second.size());
    std::memcpy(merged.data() + rel, i->second.data(), i->second.size());
  }
  if (merged.size() < new_end - new_start) merged.resize(new_end - new_start);
  std::memcpy(merged.data() + (offset - new_start), data.data(), data.size());
  extents_.erase(first, last);
  bytes_ += merged.size();
  extents_.emplace(new_start, std::move(merged));
  return bytes_ > before ? bytes_ - before : 0;
}

void DirtyBuffer::Overlay(uint64_t offset, uint64_t len, char* dst,
                          const std::function<void(uint64_t, uint64_t)>& covered) const {
  uint64_t end = offset + len;
  auto it = extents_.upper_bound(offset);
  if (it != extents_.begin()) --it;
  for (; it != extents_.end() && it->first < end; ++it) {
    uint64_t s = std::max(offset, it->first);
    uint64_t e = std::min<uint64_t>(end, it->first + it->second.size());
    if (s >= e) continue;
    std::memcpy(dst + (s - offset), it->second.data() + (s - it->first), e - s);
    if (covered) covered(s, e);
  }
}

uint64_t DirtyBuffer::Truncate(uint64_t size) {
  uint64_t before = bytes_;
  auto it = extents_.lower_bound(size);
  if (it != extents_.begin()) {
    auto prev = std::prev(it);
    uint64_t pend = prev->first + prev->second.size();
    if (pend > size) {
      bytes_ -= pend - size;
      prev->second.resize(size - prev->first);
      prev->second.shrink_to_fit();
    }
  }
  while (it != extents_.end()) {
    bytes_ -= it->second.size();
    it = extents_.erase(it);
  }
  return before - bytes_;
}

std::map<uint64_t, std::string>::iterator DirtyBuffer::TakeFullSlotsOf(std::map<uint64_t, std::string>::iterator it,
                                                                      std::vector<Extent>* out) {
  uint64_t start = it->first, end = start + it->second.size();
  uint64_t first_slot = (start + slot_size_ - 1) / slot_size_ * slot_size_;  // first slot start >= start
  uint64_t last_slot_end = end / slot_size_ * slot_size_;                    // last slot end <= end
  if (first_slot >= last_slot_end) return std::next(it);
  std::string data = std::move(it->second);
  it = extents_.erase(it);
  bytes_ -= data.size();
  if (first_slot == start && last_slot_end == end && data.size() == slot_size_) {
    out->push_back(Extent{start, std::move(data)});
    return it;
  }
  for (uint64_t s = first_slot; s < last_slot_end; s += slot_size_) {
    out->push_back(Extent{s, data.substr(s - start, slot_size_)});
  }
  if (start < first_slot) {
    std::string left = data.substr(0, first_slot - start);
    bytes_ += left.size();
    extents_.emplace(start, std::move(left));
  }
  if (last_slot_end < end) {
    std::string right = data.substr(last_slot_end - start);
    bytes_ += right.size();
    it = std::next(extents_.emplace(last_slot_end, std::move(right)).first);
  }
  return it;
}

std::vector<Extent> DirtyBuffer::TakeFullSlots() {
  std::vector<Extent> out;
  for (auto it = extents_.begin(); it != extents_.end();) it = TakeFullSlotsOf(it, &out);
  return out;
}

std::vector<Extent> DirtyBuffer::TakeFullSlotsAt(uint64_t offset) {
  std::vector<Extent> out;
  auto it = extents_.upper_bound(offset);
  if (it == extents_.begin()) return out;
  --it;
  if (it->first + it->second.size() <= offset) return out;
  // A whole slot needs at least slot_size bytes.
  if (it->second.size() >= slot_size_) TakeFullSlotsOf(it, &out);
  return out;
}

std::vector<Extent> DirtyBuffer::TakeAll() {
  std::vector<Extent> out;
  out.reserve(extents_.size());
  for (auto& [off, data] : extents_) out.push_back(Extent{off, std::move(data)});
  extents_.clear();
  bytes_ = 0;
  return out;
}

uint64_t DirtyBuffer::end() const {
  if (extents_.empty()) return 0;
  auto last = std::prev(extents_.end());
  return last->first + last->second.size();
}

}  // namespace kelp::mount
