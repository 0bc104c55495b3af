#include "filer/core/mutation.h"

#include "filer/core/filer_service.h"
#include "filer/store/records.h"
#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

void Mutation::Collect(const std::map<std::string, uint64_t>& blobs, uint64_t ino,
                       const std::set<std::string>& still_used) {
  Garbage g{{}, {}, ino};
  for (const auto& [fid, size] : blobs) {
    if (still_used.count(fid)) continue;
    g.fids.push_back(fid);
    g.sizes.push_back(size);
  }
  if (!g.fids.empty()) garbage_.push_back(std::move(g));
}

std::vector<FreedBlob> Mutation::FreedOf(uint64_t ino) const {
  std::vector<FreedBlob> out;
  for (const Garbage& g : garbage_) {
    if (g.ino != ino) continue;
    for (size_t i = 0; i < g.fids.size(); ++i) {
      FreedBlob& b = out.emplace_back();
      b.set_fid(g.fids[i]);
      b.set_size(g.sizes[i]);
    }
  }
  return out;
}

absl::Status Mutation::Commit(bool sync) {
  if (committed_) return absl::InternalError("mutation committed twice");
  committed_ = true;
  for (const Garbage& g : garbage_) {
    if (auto s = fs_->gc_.Enqueue(&batch_, g.fids, g.ino); !s.ok()) return s;
  }
  size_t stripe = 0;
  int64_t count = 0;
  if (inode_delta_ != 0) {
    stripe = guard_.held().at(0);
    std::string key = keys::CounterKey(static_cast<uint32_t>(stripe));
    if (fs_->kv_->shared()) {
      // Read in the transaction: another filer may have changed this stripe's count.
      auto v = fs_->rd().Get(key);
      if (v.ok()) {
        ASSIGN_OR_RETURN(count, DecodeCounter(*v));
      } else if (!absl::IsNotFound(v.status())) {
        return v.status();
      }
    } else {
      // Only this process writes it, under the stripe this mutation holds: the copy is exact.
      count = fs_->counters_[stripe].load();
    }
    count += inode_delta_;
    batch_.Put(key, EncodeCounter(count));
  }
  absl::Status s = fs_->events_.Write(batch_, events_, sync, TxnScope::Current(fs_));
  if (!s.ok()) return s;
  if (inode_delta_ != 0) {
    fs_->counters_[stripe] = count;
    fs_->InvalidateInodeCount();
  }
  if (!garbage_.empty()) {
    size_t n = 0;
    for (const Garbage& g : garbage_) n += g.fids.size();
    fs_->gc_.Queued(n);
    fs_->gc_.Wake();
  }
  return s;
}

}  // namespace kelp::filer
