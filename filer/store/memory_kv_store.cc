// In-memory KvStore for unit tests: a std::map under a mutex; Scan copies its range, which
// gives the snapshot semantics of the interface.
#include <map>

#include "absl/base/thread_annotations.h"
#include "filer/store/kv_store.h"
#include "shared/mutex.h"

namespace kelp::filer {
namespace {

class MemoryIterator : public KvIterator {
 public:
  explicit MemoryIterator(std::vector<std::pair<std::string, std::string>> items) : items_(std::move(items)) {}
  bool Valid() const override { return pos_ < items_.size(); }
  void Next() override { ++pos_; }
  std::string_view key() const override { return items_[pos_].first; }
  std::string_view value() const override { return items_[pos_].second; }
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
  size_t pos_ = 0;
};

class MemoryKvStore : public KvStore {
 public:
  absl::StatusOr<std::string> Get(std::string_view key) override {
    MutexLock lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return absl::NotFoundError("key not found");
    return it->second;
  }

  absl::Status Write(const WriteBatch& batch, bool) override {
    MutexLock lock(mu_);
    for (const auto& op : batch.ops()) {
      switch (op.kind) {
        case WriteBatch::Op::kPut: map_[op.key] = op.value; break;
        case WriteBatch::Op::kDelete: map_.erase(op.key); break;
        case WriteBatch::Op::kDeleteRange:
          map_.erase(map_.lower_bound(op.key), map_.lower_bound(op.value));
          break;
      }
    }
    return absl::OkStatus();
  }

  using KvStore::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                   size_t limit_hint) override {
    MutexLock lock(mu_);
    std::vector<std::pair<std::string, std::string>> items;
    auto last = end.empty() ? map_.end() : map_.lower_bound(end);
    for (auto it = map_.lower_bound(begin); it != last; ++it) {
      if (limit_hint > 0 && items.size() >= limit_hint) break;
      items.emplace_back(it->first, it->second);
    }
    return std::make_unique<MemoryIterator>(std::move(items));
  }

  absl::Status Sync() override { return absl::OkStatus(); }

  uint64_t ApproximateSize() override {
    MutexLock lock(mu_);
    uint64_t n = 0;
    for (const auto& [k, v] : map_) n += k.size() + v.size();
    return n;
  }

 private:
  Mutex mu_;
  std::map<std::string, std::string, std::less<>> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<KvStore> NewMemoryKvStore() { return std::make_unique<MemoryKvStore>(); }

}  // namespace kelp::filer
