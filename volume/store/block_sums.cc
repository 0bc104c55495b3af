#include "volume/store/block_sums.h"

namespace kelp::volume {

std::shared_ptr<const BlockSums::Entry> BlockSums::Find(uint64_t key, const File* file, uint64_t offset) {
  MutexLock lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  const std::shared_ptr<const Entry>& e = it->second.first;
  // A file that is gone (a vacuum replaced it) cannot compare equal: lock() gives null.
  if (e->offset != offset || e->file.lock().get() != file) {
    EraseLocked(key);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second.second);
  return e;
}

void BlockSums::Put(uint64_t key, std::shared_ptr<const Entry> entry) {
  const size_t cost = Cost(*entry);
  if (cost > max_bytes_) return;
  MutexLock lock(mu_);
  EraseLocked(key);
  while (bytes_ + cost > max_bytes_ && !lru_.empty()) EraseLocked(lru_.back());
  lru_.push_front(key);
  map_.emplace(key, std::make_pair(std::move(entry), lru_.begin()));
  bytes_ += cost;
}

void BlockSums::Erase(uint64_t key) {
  MutexLock lock(mu_);
  EraseLocked(key);
}

void BlockSums::EraseLocked(uint64_t key) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  bytes_ -= Cost(*it->second.first);
  lru_.erase(it->second.second);
  map_.erase(it);
}

}  // namespace kelp::volume
