// RepairStage::kSequences: a sequence mark below a number in use is raised, so the filer
// never hands that number out again.
#include "filer/fsck/repairer.h"

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status Repairer::RaiseSequence(const Problem& p) {
  std::string v;
  PutFixed64BE(&v, p.value);
  WriteBatch b;
  b.Put(keys::SequenceKey(p.name), v);
  RETURN_IF_ERROR(kv_.Write(b, true));
  ++fixes_;
  log_(fmt::format("sequence {}: mark raised to {}", p.name, p.value));
  return absl::OkStatus();
}

}  // namespace kelp::filer
