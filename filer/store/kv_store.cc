#include "filer/store/kv_store.h"

#include "absl/strings/cord.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr std::string_view kMissingKeyPayload = "kelp.filer/missing-key";

// The transaction of a store that only one process opens: reads go straight to the store and
// Commit is a Write. The filer's striped locks make its read-check-writes atomic there.
class DirectTxn : public KvTxn {
 public:
  explicit DirectTxn(KvStore* kv) : kv_(kv) {}
  absl::StatusOr<std::string> Get(std::string_view key) override { return kv_->Get(key); }
  using KvTxn::Scan;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                   size_t limit_hint) override {
    return kv_->Scan(begin, end, limit_hint);
  }
  absl::StatusOr<uint64_t> Count(std::string_view begin, std::string_view end) override {
    return kv_->Count(begin, end);
  }
  absl::Status Commit(const WriteBatch& batch, bool sync) override {
    if (done_) return absl::FailedPreconditionError("transaction already committed");
    done_ = true;
    if (batch.empty()) return absl::OkStatus();
    return kv_->Write(batch, sync);
  }

 private:
  KvStore* const kv_;
  bool done_ = false;
};

}  // namespace

bool WriteBatch::has_requires() const {
  for (const auto& op : ops_) {
    if (op.kind == Op::kRequire) return true;
  }
  return false;
}

absl::StatusOr<uint64_t> KvReader::Count(std::string_view begin, std::string_view end) {
  uint64_t n = 0;
  auto it = Scan(begin, end);
  for (; it->Valid(); it->Next()) ++n;
  if (!it->status().ok()) return it->status();
  return n;
}

std::unique_ptr<KvTxn> KvStore::Begin() { return std::make_unique<DirectTxn>(this); }

absl::Status ConflictError(std::string_view message) {
  return absl::AbortedError(StrCat("transaction conflict: ", message));
}

bool IsConflict(const absl::Status& s) { return s.code() == absl::StatusCode::kAborted; }

absl::Status MissingKeyError(std::string_view key) {
  absl::Status s = absl::FailedPreconditionError("a key the write requires is absent");
  s.SetPayload(absl::string_view(kMissingKeyPayload.data(), kMissingKeyPayload.size()), absl::Cord(std::string(key)));
  return s;
}

std::optional<std::string> MissingKeyOf(const absl::Status& s) {
  auto p = s.GetPayload(absl::string_view(kMissingKeyPayload.data(), kMissingKeyPayload.size()));
  if (!p) return std::nullopt;
  return std::string(*p);
}

}  // namespace kelp::filer
