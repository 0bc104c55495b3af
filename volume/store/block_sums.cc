#include "volume/store/block_sums.h"

#include "shared/hash.h"

namespace kelp::volume {

void BlockSums::TakeSums(std::string_view data, std::vector<uint64_t>* blocks) {
  for (size_t b = 0; b < data.size(); b += kBlockSize) blocks->push_back(Hash64(data.substr(b, kBlockSize)));
}

std::shared_ptr<const BlockSums::Entry> BlockSums::Find(uint64_t key, const File* file, uint64_t offset) {
  MutexLock lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  Slot& slot = it->second;
  // A file that is gone (a vacuum replaced it) cannot compare equal: lock() gives null.
  if (slot.entry->offset != offset || slot.entry->file.lock().get() != file) {
    EraseLocked(key);
    return nullptr;
  }
  if (slot.probation) {
    // Read once: kept like sums taken by a read.
    probation_bytes_ -= Cost(*slot.entry);
    main_.splice(main_.begin(), probation_, slot.pos);
    slot.probation = false;
  } else {
    main_.splice(main_.begin(), main_, slot.pos);
  }
  return slot.entry;
}

void BlockSums::Insert(uint64_t key, std::shared_ptr<const Entry> entry, bool probation) {
  const size_t cost = Cost(*entry);
  const size_t probation_max = max_bytes_ / 4;
  if (cost > (probation ? probation_max : max_bytes_)) return;
  MutexLock lock(mu_);
  EraseLocked(key);
  if (probation) {
    while (probation_bytes_ + cost > probation_max && !probation_.empty()) EraseLocked(probation_.back());
  }
  // Over the whole budget (the probation segment is within its quarter by now): the main
  // segment's least recently used go, so writes take it down to three quarters at most.
  while (bytes_ + cost > max_bytes_ && !(main_.empty() && probation_.empty())) {
    EraseLocked(main_.empty() ? probation_.back() : main_.back());
  }
  std::list<uint64_t>& list = probation ? probation_ : main_;
  list.push_front(key);
  map_.emplace(key, Slot{std::move(entry), probation, list.begin()});
  bytes_ += cost;
  if (probation) probation_bytes_ += cost;
}

void BlockSums::Erase(uint64_t key) {
  MutexLock lock(mu_);
  EraseLocked(key);
}

void BlockSums::EraseLocked(uint64_t key) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  const size_t cost = Cost(*it->second.entry);
  bytes_ -= cost;
  if (it->second.probation) {
    probation_bytes_ -= cost;
    probation_.erase(it->second.pos);
  } else {
    main_.erase(it->second.pos);
  }
  map_.erase(it);
}

size_t BlockSums::entries() const {
  MutexLock lock(mu_);
  return map_.size();
}

size_t BlockSums::probation_entries() const {
  MutexLock lock(mu_);
  return probation_.size();
}

}  // namespace kelp::volume
