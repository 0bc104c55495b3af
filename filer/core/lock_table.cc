#include "filer/core/lock_table.h"

#include <algorithm>

namespace kelp::filer {

LockTable::LockTable(size_t stripes)
    : n_(stripes == 0 ? 1 : stripes), mu_(std::make_unique<Mutex[]>(n_)) {}

size_t LockTable::StripeOf(uint64_t ino) const {
  // Fibonacci hashing spreads consecutive inode numbers over the stripes.
  return static_cast<size_t>((ino * 0x9E3779B97F4A7C15ULL) >> 20) % n_;
}

LockTable::Guard& LockTable::Guard::operator=(Guard&& o) noexcept {
  if (this != &o) {
    Unlock();
    table_ = o.table_;
    held_ = std::move(o.held_);
    o.held_.clear();
  }
  return *this;
}

// The stripes of a set are known at run time only: the analysis cannot follow them
// (ascending order, the header's lock order, is what keeps this deadlock-free).
void LockTable::Guard::Unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) table_->mu_[*it].unlock();
  held_.clear();
}

LockTable::Guard LockTable::Lock(const std::vector<uint64_t>& inos) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Guard g;
  g.table_ = this;
  for (uint64_t ino : inos) {
    if (ino != 0) g.held_.push_back(StripeOf(ino));
  }
  std::sort(g.held_.begin(), g.held_.end());
  g.held_.erase(std::unique(g.held_.begin(), g.held_.end()), g.held_.end());
  for (size_t s : g.held_) mu_[s].lock();
  return g;
}

}  // namespace kelp::filer
