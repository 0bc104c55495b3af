#include "filer/core/mutation.h"

#include "filer/core/filer_service.h"
#include "filer/store/records.h"
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
    batch_.Put(keys::CounterKey(static_cast<uint32_t>(stripe)),
               EncodeCounter(fs_->counters_[stripe].load()));
  }
  absl::Status s = fs_->events_.Write(batch_, events_, sync);
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
