// RepairStage::kCycles: one directory of each cycle (unreachable from the root) is moved
// into /lost+found.
#include "filer/fsck/repairer.h"

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status Repairer::CutCycles(const Problems& todo) {
  std::set<uint64_t> cuts;
  for (const Problem* p : todo) cuts.insert(p->value);
  for (uint64_t ino : cuts) {
    ASSIGN_OR_RETURN(auto rec, Inode(ino));
    if (!rec || !rec->IsDir() || ino == keys::kRootIno) continue;
    ASSIGN_OR_RETURN(InodeRecord lf, LostFound());
    if (lf.ino == ino) continue;
    WriteBatch b;
    std::vector<Event> events;
    uint64_t old_parent = rec->parent;
    // Its name in the directory its parent pointer names.
    std::string prefix = keys::DentryPrefix(old_parent);
    auto it = kv_.Scan(prefix, keys::PrefixEnd(prefix));
    for (; it->Valid(); it->Next()) {
      auto d = DecodeDentry(it->value());
      if (!d.ok() || d->ino != ino) continue;
      std::string name(keys::NameOf(it->key()));
      DeleteEntry(b, old_parent, name, *d);
      events.push_back(MakeEvent(EVENT_DELETE, *rec, old_parent, name));
      break;
    }
    RETURN_IF_ERROR(it->status());
    ASSIGN_OR_RETURN(auto parent, Inode(old_parent));
    if (parent && parent->IsDir() && parent->ino != lf.ino && !events.empty()) {
      if (parent->nlink > 2) --parent->nlink;
      parent->mtime_ns = parent->ctime_ns = NowNs();
      PutInodeRecord(b, *parent);
    }
    ASSIGN_OR_RETURN(std::string n, AddToLostFound(b, lf, *rec));
    PutInodeRecord(b, lf);
    PutInodeRecord(b, *rec);
    events.push_back(MakeEvent(EVENT_CREATE, *rec, lf.ino, n));
    RETURN_IF_ERROR(Commit(b, std::move(events),
                           fmt::format("directory {}: cut out of a cycle, moved to /{}/{}", ino,
                                       kLostFound, n)));
  }
  return absl::OkStatus();
}

}  // namespace kelp::filer
