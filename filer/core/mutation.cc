#include "filer/core/mutation.h"

#include "filer/core/filer_service.h"
#include "filer/store/coding.h"
#include "filer/store/keys.h"

namespace kelp::filer {

void Mutation::Collect(std::vector<std::string> fids, uint64_t ino) {
  if (!fids.empty()) garbage_.emplace_back(std::move(fids), ino);
}

absl::Status Mutation::Commit(bool sync) {
  for (const auto& [fids, ino] : garbage_) {
    if (auto s = fs_->gc_.Enqueue(&batch_, fids, ino); !s.ok()) return s;
  }
  size_t stripe = 0;
  if (inode_delta_ != 0) {
    stripe = guard_.held().at(0);
    fs_->counters_[stripe] += inode_delta_;
    std::string v;
    PutVarsint64(&v, fs_->counters_[stripe].load());
    batch_.Put(keys::CounterKey(static_cast<uint32_t>(stripe)), v);
  }
  uint64_t first = 0;
  if (!events_.empty()) {
    auto r = fs_->events_.Reserve(events_.size());
    if (!r.ok()) {
      if (inode_delta_ != 0) fs_->counters_[stripe] -= inode_delta_;
      return r.status();
    }
    first = *r;
    int64_t now = fs_->NowNs();
    for (size_t i = 0; i < events_.size(); ++i) {
      Event& e = events_[i];
      e.set_seq(first + i);
      if (e.time_ns() == 0) e.set_time_ns(now);
      batch_.Put(keys::EventKey(first + i), e.SerializeAsString());
    }
  }
  absl::Status s = fs_->kv_->Write(batch_, sync);
  if (!events_.empty()) fs_->events_.Complete(first, events_.size());
  if (!s.ok()) {
    if (inode_delta_ != 0) fs_->counters_[stripe] -= inode_delta_;
    return s;
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
