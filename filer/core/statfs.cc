// StatFs: space from the cluster's volume topology, files from the exact inode count.
#include "filer/client/limits.h"
#include "filer/core/filer_service.h"

namespace kelp::filer {
namespace {

constexpr uint64_t kBlockSize = 4096;
// The namespace has no fixed inode table; report this many files as the total so `df -i`
// shows something meaningful.
constexpr uint64_t kFileCapacity = 1ULL << 40;

}  // namespace

absl::StatusOr<StatFsResponse> FilerService::StatFs() {
  ClusterApi::Capacity cap = cluster_->GetCapacity();
  StatFsResponse r;
  r.set_block_size(kBlockSize);
  r.set_total_blocks(cap.total_bytes / kBlockSize);
  r.set_free_blocks(std::min(cap.free_bytes, cap.total_bytes) / kBlockSize);
  uint64_t used = static_cast<uint64_t>(std::max<int64_t>(InodeCount(), 0));
  r.set_total_files(std::max(kFileCapacity, used));
  r.set_free_files(std::max(kFileCapacity, used) - used);
  r.set_name_max(kMaxNameLen);
  return r;
}

}  // namespace kelp::filer
