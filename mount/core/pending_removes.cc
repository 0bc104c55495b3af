#include "mount/core/pending_removes.h"

namespace kelp::mount {

void PendingRemoves::Add(uint64_t dir, std::string_view name) {
  MutexLock lock(mu_);
  while (max_ > 0 && total_ >= max_) cv_.Wait(lock);
  ++names_[{dir, std::string(name)}];
  ++dirs_[dir];
  any_.store(++total_, std::memory_order_release);
}

void PendingRemoves::Done(uint64_t dir, std::string_view name) {
  {
    MutexLock lock(mu_);
    auto it = names_.find({dir, std::string(name)});
    if (it == names_.end()) return;
    if (--it->second == 0) names_.erase(it);
    auto d = dirs_.find(dir);
    if (--d->second == 0) dirs_.erase(d);
    any_.store(--total_, std::memory_order_release);
  }
  cv_.NotifyAll();
}

bool PendingRemoves::Has(uint64_t dir, std::string_view name) {
  if (any_.load(std::memory_order_acquire) == 0) return false;
  MutexLock lock(mu_);
  return names_.contains({dir, std::string(name)});
}

void PendingRemoves::WaitDir(uint64_t dir) {
  if (any_.load(std::memory_order_acquire) == 0) return;
  MutexLock lock(mu_);
  while (dirs_.contains(dir)) cv_.Wait(lock);
}

void PendingRemoves::WaitAll() {
  if (any_.load(std::memory_order_acquire) == 0) return;
  MutexLock lock(mu_);
  while (total_ > 0) cv_.Wait(lock);
}

size_t PendingRemoves::size() {
  MutexLock lock(mu_);
  return total_;
}

}  // namespace kelp::mount
