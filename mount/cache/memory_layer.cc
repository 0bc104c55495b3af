#include "mount/cache/memory_layer.h"

#include <cstring>
#include <vector>

namespace kelp::mount::cache {
MemoryLayer::MemoryLayer(uint64_t capacity_bytes, EvictionKind eviction)
    : capacity_(capacity_bytes), policy_(MakeEvictionPolicy(eviction)) {}

bool MemoryLayer::Read(uint64_t key, std::string_view fid, uint64_t block_offset, uint64_t offset,
                       size_t len, char* dst) {
  std::shared_ptr<const std::string> data;
  {
    MutexLock lock(mu_);
    auto it = items_.find(key);
    if (it == items_.end() || it->second.fid != fid || it->second.block_offset != block_offset) {
      return false;
    }
    data = it->second.data;
    policy_->Touch(key);
  }
  if (offset + len > data->size()) return false;
  std::memcpy(dst, data->data() + offset, len);
  return true;
}

bool MemoryLayer::Insert(uint64_t key, std::string_view fid, uint64_t block_offset,
                         std::shared_ptr<const std::string> data) {
  uint64_t charge = data->size() + fid.size() + kItemOverhead;
  if (!Admits(data->size() + fid.size())) return false;
  std::vector<std::shared_ptr<const std::string>> dropped;
  MutexLock lock(mu_);
  if (items_.contains(key)) return false;
  while (policy_->bytes() + charge > capacity_) {
    std::optional<uint64_t> victim = policy_->Evict();
    if (!victim) break;
    auto it = items_.find(*victim);
    dropped.push_back(std::move(it->second.data));
    items_.erase(it);
  }
  items_.emplace(key, Item{std::string(fid), block_offset, std::move(data), charge});
  policy_->Add(key, charge);
  return true;
}  // `lock` goes before `dropped`: evicted data is freed outside the lock

void MemoryLayer::Erase(uint64_t key, std::string_view fid, uint64_t block_offset) {
  std::shared_ptr<const std::string> dropped;
  MutexLock lock(mu_);
  auto it = items_.find(key);
  if (it == items_.end() || it->second.fid != fid || it->second.block_offset != block_offset) return;
  dropped = std::move(it->second.data);
  policy_->Erase(key);
  items_.erase(it);
}  // `lock` goes before `dropped`: the data is freed outside the lock

uint64_t MemoryLayer::bytes() const {
  MutexLock lock(mu_);
  return policy_->bytes();
}

size_t MemoryLayer::entries() const {
  MutexLock lock(mu_);
  return items_.size();
}

}  // namespace kelp::mount::cache
