// Unlink, Rmdir and RemoveTree.
#include <sys/stat.h>

#include <cerrno>

#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/core/names.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<Attr> FilerService::Unlink(uint64_t parent, std::string_view name) {
  ASSIGN_OR_RETURN(InodeRecord rec, Transact([&] { return RemoveName(parent, name, false); }));
  return rec.ToAttr();
}

absl::Status FilerService::Rmdir(uint64_t parent, std::string_view name) {
  return Transact([&] { return RemoveName(parent, name, true); }).status();
}

absl::StatusOr<InodeRecord> FilerService::RemoveName(uint64_t parent, std::string_view name,
                                                     bool rmdir) {
  RETURN_IF_ERROR(ValidateName(name));
  for (;;) {
    RETURN_IF_ERROR(LoadDir(parent).status());
    ASSIGN_OR_RETURN(auto seen, LoadDentry(parent, name));
    if (!seen) return PosixError(ENOENT, StrCat("no entry ", name));
    // The child is only known after reading the dentry; lock both, then make sure the name
    // still points at it (else someone renamed over it: go round again).
    auto guard = locks_.Lock({parent, seen->ino});
    ASSIGN_OR_RETURN(auto d, LoadDentry(parent, name));
    if (!d) return PosixError(ENOENT, StrCat("no entry ", name));
    if (d->ino != seen->ino) continue;
    ASSIGN_OR_RETURN(InodeRecord dir, LoadDir(parent));
    ASSIGN_OR_RETURN(InodeRecord child, LoadInode(d->ino));
    if (rmdir) {
      if (!child.IsDir()) return PosixError(ENOTDIR, StrCat(name, " is not a directory"));
      ASSIGN_OR_RETURN(bool empty, DirIsEmpty(child.ino));
      if (!empty) return PosixError(ENOTEMPTY, StrCat(name, " is not empty"));
    } else if (child.IsDir()) {
      return PosixError(EISDIR, StrCat(name, " is a directory"));
    }

    int64_t now = NowNs();
    Mutation m(this, guard);
    RemoveEntry(m, parent, name, *d);
    dir.mtime_ns = dir.ctime_ns = now;
    child.ctime_ns = now;
    if (child.IsDir()) {
      --dir.nlink;
      child.nlink = 0;
    } else {
      --child.nlink;
    }
    PutInode(m, dir);
    if (child.nlink == 0) {
      RETURN_IF_ERROR(DropOrOrphan(m, child));
    } else {
      PutInode(m, child);
    }
    Event removed = MakeEvent(EVENT_DELETE, child, parent, name);
    removed.set_parent_version(dir.version);
    m.Emit(std::move(removed));
    RETURN_IF_ERROR(m.Commit());
    return child;
  }
}

namespace {

// Rounds RemoveTree empties a directory that keeps getting new entries before giving up.
constexpr int kRemoveTreeRounds = 3;
// Deepest nesting RemoveTree follows.
constexpr int kRemoveTreeDepth = 4096;

}  // namespace

absl::Status FilerService::RemoveTree(uint64_t parent, std::string_view name) {
  RETURN_IF_ERROR(ValidateName(name));
  for (int round = 0;; ++round) {
    ASSIGN_OR_RETURN(Attr a, Lookup(parent, name));
    if (!S_ISDIR(a.mode())) return Unlink(parent, name).status();
    RETURN_IF_ERROR(EmptyDir(a.ino(), 0));
    absl::Status s = Rmdir(parent, name);
    if (ErrnoOf(s) != ENOTEMPTY || round + 1 >= kRemoveTreeRounds) return s;
  }
}

absl::Status FilerService::EmptyDir(uint64_t dir, int depth) {
  if (depth > kRemoveTreeDepth) return PosixError(ELOOP, "directory tree too deep");
  for (;;) {
    std::vector<DirEntry> batch;
    RETURN_IF_ERROR(ListByName(dir, "", 1024, false, [&](DirEntry&& e) {
      batch.push_back(std::move(e));
      return true;
    }));
    if (batch.empty()) return absl::OkStatus();
    for (const DirEntry& e : batch) {
      absl::Status s;
      if (S_ISDIR(e.type())) {
        s = EmptyDir(e.ino(), depth + 1);
        if (s.ok()) s = Rmdir(dir, e.name());
      } else {
        s = Unlink(dir, e.name()).status();
      }
      // ENOENT: someone else removed it first; ENOTEMPTY: refilled, the next pass retries.
      if (!s.ok() && ErrnoOf(s) != ENOENT && ErrnoOf(s) != ENOTEMPTY) return s;
    }
  }
}

}  // namespace kelp::filer
