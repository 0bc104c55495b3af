#include "filer/core/mutation.h"

#include "filer/core/filer_service.h"
#include "filer/store/coding.h"
#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

void Mutation::Collect(std::vector<std::string> fids, uint64_t ino) {
  if (!fids.empty()) garbage_.emplace_back(std::move(fids), ino);
}

absl::Status Mutation::Commit() {
  if (committed_) return absl::InternalError("mutation committed twice");
  committed_ = true;
  for (const auto& [fids, ino] : garbage_) {
    if (auto s = fs_->gc_.Enqueue(&batch_, fids, ino); !s.ok()) return s;
  }
  size_t stripe = 0;
  int64_t count = 0;
  if (inode_delta_ != 0) {
    // Read in the transaction: another filer may have changed this stripe's count.
    stripe = guard_.held().at(0);
    std::string key = keys::CounterKey(static_cast<uint32_t>(stripe));
    auto v = fs_->rd().Get(key);
    if (v.ok()) {
      std::string_view in = *v;
      if (!GetVarsint64(&in, &count)) return absl::DataLossError("corrupt inode counter");
    } else if (!absl::IsNotFound(v.status())) {
      return v.status();
    }
    count += inode_delta_;
    std::string nv;
    PutVarsint64(&nv, count);
    batch_.Put(key, nv);
  }
  EventLog::Reservation res;
  if (!events_.empty()) {
    ASSIGN_OR_RETURN(res, fs_->events_.Reserve(events_.size()));
    if (!res.guard.empty()) batch_.Require(res.guard);
    int64_t now = fs_->NowNs();
    for (size_t i = 0; i < events_.size(); ++i) {
      Event& e = events_[i];
      e.set_seq(res.first + i);
      if (e.time_ns() == 0) e.set_time_ns(now);
      batch_.Put(keys::EventKey(res.first + i), e.SerializeAsString());
    }
  }
  KvTxn* txn = TxnScope::Current(fs_);
  absl::Status s = txn ? txn->Commit(batch_, false) : fs_->kv_->Write(batch_, false);
  if (!events_.empty()) fs_->events_.Complete(res.first, events_.size());
  if (!s.ok()) {
    if (auto missing = MissingKeyOf(s); missing && !res.guard.empty() && *missing == res.guard) {
      // Absent from this transaction's snapshot: revoked, or opened after the snapshot was
      // taken (then it is still there). Either way the operation runs again.
      auto now = fs_->kv_->Get(res.guard);
      if (absl::IsNotFound(now.status())) fs_->events_.Revoked(res.guard);
      return ConflictError("the event range is not in this transaction's snapshot");
    }
    return s;
  }
  if (inode_delta_ != 0) {
    fs_->counters_[stripe] = count;
    fs_->InvalidateInodeCount();
  }
  if (!garbage_.empty()) {
    size_t n = 0;
    for (const auto& g : garbage_) n += g.first.size();
    fs_->gc_.Queued(n);
    fs_->gc_.Wake();
  }
  return s;
}

}  // namespace kelp::filer
