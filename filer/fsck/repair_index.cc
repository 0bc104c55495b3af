// RepairStage::kDirIndex: cookie counters raised above the cookies in use, and the readdir
// index entry of every dentry rebuilt (a new cookie where its slot belongs to another name).
#include "filer/fsck/repairer.h"

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status Repairer::FixIndex(const Problems& todo) {
  std::map<uint64_t, uint64_t> max_cookie;
  for (const Problem* p : todo) {
    if (p->kind == ProblemKind::kDentryCookie) {
      max_cookie[p->parent] = std::max(max_cookie[p->parent], p->value);
    }
  }
  for (const auto& [dir, cookie] : max_cookie) {
    ASSIGN_OR_RETURN(auto rec, Inode(dir));
    if (!rec || rec->next_cookie > cookie) continue;
    uint64_t old = rec->next_cookie;
    rec->next_cookie = cookie + 1;
    WriteBatch b;
    PutInodeRecord(b, *rec);
    RETURN_IF_ERROR(Commit(b, {}, fmt::format("directory {}: next cookie {} -> {}", dir, old,
                                              rec->next_cookie)));
  }
  for (const Problem* p : todo) {
    if (p->kind != ProblemKind::kDentryIndex) continue;
    ASSIGN_OR_RETURN(auto d, Dentry(p->parent, p->name));
    ASSIGN_OR_RETURN(auto dir, Inode(p->parent));
    if (!d || !dir || !dir->IsDir()) continue;
    auto k = kv_.Get(keys::DirIndexKey(p->parent, d->cookie));
    if (!k.ok() && !absl::IsNotFound(k.status())) return k.status();
    auto slot = k.ok() ? DecodeDirIndex(*k) : absl::StatusOr<DirIndexValue>(k.status());
    WriteBatch b;
    uint64_t cookie = d->cookie;
    if (k.ok() && slot.ok() && slot->name != p->name) {
      // The slot belongs to another name: this entry gets a new one.
      cookie = dir->next_cookie++;
      PutInodeRecord(b, *dir);
      b.Put(keys::DentryKey(p->parent, p->name), EncodeDentry({d->ino, d->type, cookie}));
    }
    b.Put(keys::DirIndexKey(p->parent, cookie), EncodeDirIndex(d->ino, d->type, p->name));
    RETURN_IF_ERROR(Commit(b, {}, fmt::format("entry {}/{}: readdir index rebuilt (cookie {})",
                                              p->parent, p->name, cookie)));
  }
  return absl::OkStatus();
}

}  // namespace kelp::filer
