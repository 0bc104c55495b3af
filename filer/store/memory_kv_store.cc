// In-memory KvStore for unit tests: a std::map under a mutex; Scan copies its range, which
// gives the snapshot semantics of the interface.
//
// Shared mode stands in for a store several filers write (PostgreSQL): transactions are
// optimistic. They read the latest committed state and remember what they read (keys and
// ranges); Commit checks under the mutex that no commit since the transaction began wrote any
// of it, else answers a conflict. That is serializable, as the SQL backends are, and lets
// tests run two FilerServices over one store.
#include <map>

#include "absl/base/thread_annotations.h"
#include "filer/store/kv_store.h"
#include "shared/mutex.h"

namespace kelp::filer {
namespace {

using Items = std::vector<std::pair<std::string, std::string>>;

class MemoryIterator : public KvIterator {
 public:
  explicit MemoryIterator(Items items) : items_(std::move(items)) {}
  bool Valid() const override { return pos_ < items_.size(); }
  void Next() override { ++pos_; }
  std::string_view key() const override { return items_[pos_].first; }
  std::string_view value() const override { return items_[pos_].second; }
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  Items items_;
  size_t pos_ = 0;
};

class MemoryKvStore : public KvStore {
 public:
  explicit MemoryKvStore(bool shared) : shared_(shared) {}

  absl::StatusOr<std::string> Get(std::string_view key) override {
    MutexLock lock(mu_);
    return GetLocked(key);
  }

  absl::Status Write(const WriteBatch& batch, bool) override {
    MutexLock lock(mu_);
    return ApplyLocked(batch);
  }

  using KvStore::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                   size_t limit_hint) override {
    MutexLock lock(mu_);
    return std::make_unique<MemoryIterator>(ScanLocked(begin, end, limit_hint));
  }

  absl::Status Sync() override { return absl::OkStatus(); }

  uint64_t ApproximateSize() override {
    MutexLock lock(mu_);
    uint64_t n = 0;
    for (const auto& [k, v] : map_) n += k.size() + v.size();
    return n;
  }

  std::unique_ptr<KvTxn> Begin() override;
  bool shared() const override { return shared_; }
  std::string_view kind() const override { return "memory"; }

 private:
  friend class OccTxn;

  absl::StatusOr<std::string> GetLocked(std::string_view key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = map_.find(key);
    if (it == map_.end()) return absl::NotFoundError("key not found");
    return it->second;
  }

  Items ScanLocked(std::string_view begin, std::string_view end, size_t limit_hint)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Items items;
    auto last = end.empty() ? map_.end() : map_.lower_bound(end);
    for (auto it = map_.lower_bound(begin); it != last; ++it) {
      if (limit_hint > 0 && items.size() >= limit_hint) break;
      items.emplace_back(it->first, it->second);
    }
    return items;
  }

  void Touch(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shared_) written_[key] = version_;
  }

  absl::Status ApplyLocked(const WriteBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& op : batch.ops()) {
      if (op.kind == WriteBatch::Op::kRequire && map_.find(op.key) == map_.end()) {
        return MissingKeyError(op.key);
      }
    }
    ++version_;
    for (const auto& op : batch.ops()) {
      switch (op.kind) {
        case WriteBatch::Op::kPut:
          map_[op.key] = op.value;
          Touch(op.key);
          break;
        case WriteBatch::Op::kDelete:
          map_.erase(op.key);
          Touch(op.key);
          break;
        case WriteBatch::Op::kDeleteRange: {
          auto first = map_.lower_bound(op.key);
          auto last = op.value.empty() ? map_.end() : map_.lower_bound(op.value);
          if (!op.value.empty() && op.value <= op.key) break;
          for (auto it = first; it != last; ++it) Touch(it->first);
          map_.erase(first, last);
          if (shared_) range_writes_.push_back({op.key, op.value, version_});
          break;
        }
        case WriteBatch::Op::kRequire: break;
      }
    }
    return absl::OkStatus();
  }

  // True when a commit after `since` wrote key or something in [begin, end).
  bool ChangedSinceLocked(const std::string& begin, const std::optional<std::string>& end,
                          uint64_t since) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!end) {
      auto it = written_.find(begin);
      if (it != written_.end() && it->second > since) return true;
      for (const auto& r : range_writes_) {
        if (r.version > since && begin >= r.begin && (r.end.empty() || begin < r.end)) return true;
      }
      return false;
    }
    auto stop = end->empty() ? written_.end() : written_.lower_bound(*end);
    for (auto it = written_.lower_bound(begin); it != stop; ++it) {
      if (it->second > since) return true;
    }
    // Ranges [a, b) with b empty reaching to the end of the keyspace.
    for (const auto& r : range_writes_) {
      if (r.version > since && (end->empty() || r.begin < *end) && (r.end.empty() || begin < r.end)) return true;
    }
    return false;
  }

  struct RangeWrite {
    std::string begin, end;  // end empty: to the end of the keyspace
    uint64_t version;
  };

  const bool shared_;
  Mutex mu_;
  std::map<std::string, std::string, std::less<>> map_ ABSL_GUARDED_BY(mu_);
  // Shared mode: the commit that last wrote each key, and range deletes, for validation.
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t, std::less<>> written_ ABSL_GUARDED_BY(mu_);
  std::vector<RangeWrite> range_writes_ ABSL_GUARDED_BY(mu_);
};

class OccTxn : public KvTxn {
 public:
  explicit OccTxn(MemoryKvStore* kv) : kv_(kv) {
    MutexLock lock(kv_->mu_);
    start_ = kv_->version_;
  }

  absl::StatusOr<std::string> Get(std::string_view key) override {
    MutexLock lock(kv_->mu_);
    if (!committed_) reads_.push_back({std::string(key), std::nullopt});
    return kv_->GetLocked(key);
  }

  using KvTxn::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                   size_t limit_hint) override {
    MutexLock lock(kv_->mu_);
    Items items = kv_->ScanLocked(begin, end, limit_hint);
    if (!committed_) {
      // What the caller could have seen: up to the last item when the hint cut the scan short.
      std::string stop(end);
      if (limit_hint > 0 && items.size() >= limit_hint) stop = items.back().first + '\0';
      reads_.push_back({std::string(begin), stop});
    }
    return std::make_unique<MemoryIterator>(std::move(items));
  }

  absl::Status Commit(const WriteBatch& batch, bool) override {
    MutexLock lock(kv_->mu_);
    if (committed_) return absl::FailedPreconditionError("transaction already committed");
    committed_ = true;
    for (const auto& r : reads_) {
      if (kv_->ChangedSinceLocked(r.begin, r.end, start_)) {
        return ConflictError("a key this transaction read was changed");
      }
    }
    if (batch.empty()) return absl::OkStatus();
    return kv_->ApplyLocked(batch);
  }

 private:
  struct Read {
    std::string begin;
    std::optional<std::string> end;  // nullopt: the point key begin
  };
  MemoryKvStore* const kv_;
  uint64_t start_ = 0;
  bool committed_ = false;
  std::vector<Read> reads_;
};

std::unique_ptr<KvTxn> MemoryKvStore::Begin() {
  if (!shared_) return KvStore::Begin();
  return std::make_unique<OccTxn>(this);
}

}  // namespace

std::unique_ptr<KvStore> NewMemoryKvStore(bool shared) {
  return std::make_unique<MemoryKvStore>(shared);
}

}  // namespace kelp::filer
