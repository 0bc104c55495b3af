// RepairStage::kCounters: the inode counters rewritten as one counter holding the number
// of inodes in the store.
#include "filer/fsck/repairer.h"

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status Repairer::RewriteCounters(uint64_t inodes) {
  WriteBatch b;
  std::string family = keys::Family(keys::kCounter);
  auto it = kv_.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) b.Delete(it->key());
  RETURN_IF_ERROR(it->status());
  b.Put(keys::CounterKey(0), EncodeCounter(static_cast<int64_t>(inodes)));
  return Commit(b, {}, fmt::format("inode counters rewritten: {} inodes", inodes));
}

}  // namespace kelp::filer
