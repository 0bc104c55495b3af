// RepairStage::kBadRecords: entries that cannot stand (naming missing inodes, inside
// non-directories, a directory's extra names) and stray records are dropped; an entry's
// type is set to its inode's.
#include "filer/fsck/repairer.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status Repairer::FixRecord(const Problem& p) {
  WriteBatch b;
  switch (p.kind) {
    case ProblemKind::kDentryParentNotDir:
    case ProblemKind::kDentryChildMissing:
    case ProblemKind::kDirExtraName: {
      ASSIGN_OR_RETURN(auto d, Dentry(p.parent, p.name));
      if (!d || d->ino != p.ino) return absl::OkStatus();
      DeleteEntry(b, p.parent, p.name, *d);
      std::vector<Event> events;
      ASSIGN_OR_RETURN(auto dir, Inode(p.parent));
      if (dir && dir->IsDir()) {
        dir->mtime_ns = dir->ctime_ns = NowNs();
        PutInodeRecord(b, *dir);
      }
      InodeRecord gone;
      gone.ino = p.ino;
      events.push_back(MakeEvent(EVENT_DELETE, gone, p.parent, p.name));
      return Commit(b, std::move(events),
                    fmt::format("entry {}/{} (inode {}) dropped: {}", p.parent, p.name, p.ino,
                                p.message));
    }
    case ProblemKind::kDentryType: {
      ASSIGN_OR_RETURN(auto d, Dentry(p.parent, p.name));
      ASSIGN_OR_RETURN(auto rec, Inode(p.ino));
      if (!d || !rec || d->ino != p.ino) return absl::OkStatus();
      b.Put(keys::DentryKey(p.parent, p.name), EncodeDentry({p.ino, rec->mode & S_IFMT, d->cookie}));
      auto k = kv_.Get(keys::DirIndexKey(p.parent, d->cookie));
      auto kv = k.ok() ? DecodeDirIndex(*k) : absl::StatusOr<DirIndexValue>(k.status());
      if (kv.ok() && kv->name == p.name) {
        b.Put(keys::DirIndexKey(p.parent, d->cookie),
              EncodeDirIndex(p.ino, rec->mode & S_IFMT, p.name));
      }
      return Commit(b, {MakeEvent(EVENT_ATTR, *rec, p.parent, p.name)},
                    fmt::format("entry {}/{}: type set to the inode's", p.parent, p.name));
    }
    default:
      // A record to drop, named by its key: stale readdir slots, orphan marks of missing
      // inodes, bad or still-referenced GC entries (the blob stays: at worst it leaks),
      // bad events.
      if (p.key.empty() || !Exists(p.key)) return absl::OkStatus();
      b.Delete(p.key);
      return Commit(b, {}, fmt::format("removed: {}", p.message));
  }
}

}  // namespace kelp::filer
