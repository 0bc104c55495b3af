#include "filer/store/sequence.h"

#include <algorithm>

#include "filer/store/coding.h"
#include "filer/store/keys.h"
#include "shared/strings.h"

namespace kelp::filer {

SequenceAllocator::SequenceAllocator(KvStore* kv, std::string_view name, uint64_t step)
    : kv_(kv), key_(keys::SequenceKey(name)), step_(std::max<uint64_t>(step, 1)) {}

absl::Status SequenceAllocator::Load(uint64_t min_first) {
  MutexLock lock(mu_);
  uint64_t mark = 0;
  auto v = kv_->Get(key_);
  if (v.ok()) {
    if (v->size() != 8) return absl::DataLossError(StrCat("corrupt sequence ", key_));
    mark = DecodeFixed64BE(*v);
  } else if (!absl::IsNotFound(v.status())) {
    return v.status();
  }
  next_ = std::max(mark, min_first);
  limit_ = next_;
  return absl::OkStatus();
}

absl::Status SequenceAllocator::PersistLimitLocked(uint64_t new_limit) {
  std::string v;
  PutFixed64BE(&v, new_limit);
  // Synced, so the mark is durable before any use of its numbers whatever ordering the
  // backend gives unsynced writes; it happens once per step, so it costs little.
  WriteBatch b;
  b.Put(key_, v);
  if (auto s = kv_->Write(b, true); !s.ok()) return s;
  limit_ = new_limit;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SequenceAllocator::Next(uint64_t n) {
  MutexLock lock(mu_);
  if (next_ + n > limit_) {
    if (auto s = PersistLimitLocked(next_ + n + step_); !s.ok()) return s;
  }
  uint64_t first = next_;
  next_ += n;
  return first;
}

absl::Status SequenceAllocator::RaiseAbove(uint64_t v) {
  MutexLock lock(mu_);
  if (v < next_) return absl::OkStatus();
  next_ = v + 1;
  if (next_ > limit_) return PersistLimitLocked(next_ + step_);
  return absl::OkStatus();
}

uint64_t SequenceAllocator::Peek() const {
  MutexLock lock(mu_);
  return next_;
}

}  // namespace kelp::filer
