#include "filer/store/sequence.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "filer/store/keys.h"
#include "shared/coding.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Attempts at taking a range before giving up (each conflict means another filer just took
// one, so this many in a row does not happen without a fault).
constexpr int kRangeAttempts = 50;

absl::StatusOr<uint64_t> ReadMark(KvReader& r, const std::string& key) {
  auto v = r.Get(key);
  if (absl::IsNotFound(v.status())) return 0;
  if (!v.ok()) return v.status();
  if (v->size() != 8) return absl::DataLossError(StrCat("corrupt sequence ", key));
  return DecodeFixed64BE(*v);
}

}  // namespace

SequenceAllocator::SequenceAllocator(KvStore* kv, std::string_view name, uint64_t step)
    : kv_(kv), key_(keys::SequenceKey(name)), step_(std::max<uint64_t>(step, 1)) {}

absl::Status SequenceAllocator::Load(uint64_t min_first) {
  MutexLock lock(mu_);
  auto mark = ReadMark(*kv_, key_);
  if (!mark.ok()) return mark.status();
  next_ = std::max(*mark, min_first);
  limit_ = next_;  // no range yet: the first Next takes one
  return absl::OkStatus();
}

absl::Status SequenceAllocator::TakeRangeLocked(uint64_t n, uint64_t floor) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  for (int attempt = 0;; ++attempt) {
    auto txn = kv_->Begin();
    auto mark = ReadMark(*txn, key_);
    absl::Status s = mark.status();
    uint64_t first = 0, limit = 0;
    if (s.ok()) {
      // When the mark is still where this allocator left it, nobody took numbers since: go
      // on from the unused end of its own range, so one allocator leaves no gap (the event
      // log publishes in order and would wait for a missing number forever).
      first = std::max(*mark == limit_ ? next_ : *mark, floor);
      limit = first + n + step_;
      std::string v;
      PutFixed64BE(&v, limit);
      WriteBatch b;
      b.Put(key_, v);
      // Synced, so the mark is durable before any use of its numbers whatever ordering the
      // backend gives unsynced writes; it happens once per step, so it costs little.
      s = txn->Commit(b, true);
    }
    if (s.ok()) {
      next_ = first;
      limit_ = limit;
      return absl::OkStatus();
    }
    if (!IsConflict(s) || attempt + 1 >= kRangeAttempts) return s;
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::uniform_int_distribution<int>(100, 1000 << std::min(attempt, 5))(rng)));
  }
}

absl::StatusOr<uint64_t> SequenceAllocator::Next(uint64_t n) {
  MutexLock lock(mu_);
  if (next_ + n > limit_) {
    if (auto s = TakeRangeLocked(n, next_); !s.ok()) return s;
  }
  uint64_t first = next_;
  next_ += n;
  return first;
}

absl::Status SequenceAllocator::RaiseAbove(uint64_t v) {
  MutexLock lock(mu_);
  if (v < next_) return absl::OkStatus();
  if (v + 1 < limit_) {
    next_ = v + 1;  // still inside this allocator's own range
    return absl::OkStatus();
  }
  return TakeRangeLocked(1, v + 1);
}

uint64_t SequenceAllocator::Peek() const {
  MutexLock lock(mu_);
  return next_;
}

}  // namespace kelp::filer
