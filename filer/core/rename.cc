// Rename, with RENAME_NOREPLACE and RENAME_EXCHANGE. Whatever the size of the subtree moved,
// a rename is one WriteBatch over a handful of keys: the namespace is keyed by inode, so
// children never move.
//
// Checks follow Linux's order (fs/namei.c do_renameat2, vfs_rename): missing source ENOENT;
// NOREPLACE with a target EEXIST; EXCHANGE without one ENOENT; a directory into its own
// subtree EINVAL; same inode on both sides is a no-op; type mismatches ENOTDIR/EISDIR; a
// non-empty directory target ENOTEMPTY (which also covers a target that is an ancestor of the
// source).
#include <sys/stat.h>

#include <cerrno>
#include <map>

#include "filer/client/limits.h"
#include "filer/core/filer_service.h"
#include "filer/core/mutation.h"
#include "filer/core/names.h"
#include "filer/store/keys.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

absl::StatusOr<RenameResult> FilerService::Rename(uint64_t parent, std::string_view name,
                                                  uint64_t new_parent, std::string_view new_name,
                                                  uint32_t flags) {
  return Transact([&] { return RenameOnce(parent, name, new_parent, new_name, flags); });
}

// On a store several filers share, rename_mu_ only orders this filer's renames; the loop
// check's reads (the parent chain IsWithin walks) are in the transaction, so a concurrent
// move through another filer that would close a loop makes one of the two conflict.
absl::StatusOr<RenameResult> FilerService::RenameOnce(uint64_t parent, std::string_view name,
                                                      uint64_t new_parent, std::string_view new_name,
                                                      uint32_t flags) {
  RETURN_IF_ERROR(ValidateName(name));
  RETURN_IF_ERROR(ValidateName(new_name));
  if ((flags & ~(kRenameNoReplace | kRenameExchange)) != 0 ||
      flags == (kRenameNoReplace | kRenameExchange)) {
    return PosixError(EINVAL, StrCat("bad rename flags ", flags));
  }
  for (;;) {
    RETURN_IF_ERROR(LoadDir(parent).status());
    RETURN_IF_ERROR(LoadDir(new_parent).status());
    ASSIGN_OR_RETURN(auto src0, LoadDentry(parent, name));
    if (!src0) return PosixError(ENOENT, StrCat("no entry ", name));
    ASSIGN_OR_RETURN(auto dst0, LoadDentry(new_parent, new_name));

    // Moving a directory to another parent changes the tree's shape; one such rename at a
    // time keeps the subtree check below true until the batch is written.
    bool moves_dir = parent != new_parent &&
                     (src0->type == S_IFDIR || (dst0 && dst0->type == S_IFDIR));
    std::unique_lock<Mutex> tree_lock(rename_mu_, std::defer_lock);
    if (moves_dir) tree_lock.lock();
    auto guard = locks_.Lock({parent, new_parent, src0->ino, dst0 ? dst0->ino : 0});
    ASSIGN_OR_RETURN(auto src, LoadDentry(parent, name));
    if (!src) return PosixError(ENOENT, StrCat("no entry ", name));
    ASSIGN_OR_RETURN(auto dst, LoadDentry(new_parent, new_name));
    bool same = src->ino == src0->ino && dst.has_value() == dst0.has_value() &&
                (!dst || dst->ino == dst0->ino);
    if (!same) continue;  // changed before we held the locks
    return RenameLocked(guard, parent, name, *src, new_parent, new_name, dst, flags);
  }
}

absl::StatusOr<RenameResult> FilerService::RenameLocked(
    const LockTable::Guard& guard, uint64_t parent, std::string_view name, const DentryValue& src,
    uint64_t new_parent, std::string_view new_name, const std::optional<DentryValue>& dst,
    uint32_t flags) {
  const bool exchange = flags & kRenameExchange;
  const bool cross = parent != new_parent;
  // One working copy per inode, so a record reached twice (parent == new_parent) is
  // updated once.
  std::map<uint64_t, InodeRecord> recs;
  auto load = [&](uint64_t ino) -> absl::StatusOr<InodeRecord*> {
    auto it = recs.find(ino);
    if (it != recs.end()) return &it->second;
    ASSIGN_OR_RETURN(InodeRecord r, LoadInode(ino));
    return &recs.emplace(ino, std::move(r)).first->second;
  };
  ASSIGN_OR_RETURN(InodeRecord * pdir, load(parent));
  ASSIGN_OR_RETURN(InodeRecord * npdir, load(new_parent));
  if (!pdir->IsDir() || !npdir->IsDir()) return PosixError(ENOTDIR, "parent is not a directory");
  if (npdir->nlink == 0) return PosixError(ENOENT, "target directory was removed");
  ASSIGN_OR_RETURN(InodeRecord * s, load(src.ino));
  InodeRecord* t = nullptr;
  if (dst) {
    ASSIGN_OR_RETURN(t, load(dst->ino));
  }

  if ((flags & kRenameNoReplace) && dst) return PosixError(EEXIST, StrCat(new_name, " exists"));
  if (exchange && !dst) return PosixError(ENOENT, StrCat("no entry ", new_name));
  if (cross && s->IsDir()) {
    ASSIGN_OR_RETURN(bool inside, IsWithin(new_parent, s->ino));
    if (inside) return PosixError(EINVAL, "cannot move a directory into its own subtree");
  }
  if (cross && exchange && t->IsDir()) {
    ASSIGN_OR_RETURN(bool inside, IsWithin(parent, t->ino));
    if (inside) return PosixError(EINVAL, "cannot move a directory into its own subtree");
  }
  if (dst && dst->ino == src.ino) {
    // Both names are links to one inode (or the very same entry): POSIX says do nothing.
    return RenameResult{s->ToAttr(), s->ToAttr(), {}};
  }
  if (!exchange && t) {
    if (s->IsDir() && !t->IsDir()) return PosixError(ENOTDIR, StrCat(new_name, " is not a directory"));
    if (!s->IsDir() && t->IsDir()) return PosixError(EISDIR, StrCat(new_name, " is a directory"));
    if (t->IsDir()) {
      ASSIGN_OR_RETURN(bool empty, DirIsEmpty(t->ino));
      if (!empty) return PosixError(ENOTEMPTY, StrCat(new_name, " is not empty"));
    }
  }

  int64_t now = NowNs();
  Mutation m(this, guard);
  if (exchange) {
    RepointEntry(m, parent, name, src.cookie, *t);
    RepointEntry(m, new_parent, new_name, dst->cookie, *s);
    if (cross) {
      if (s->IsDir()) --pdir->nlink, ++npdir->nlink;
      if (t->IsDir()) --npdir->nlink, ++pdir->nlink;
      if (s->IsDir() || s->parent == parent) s->parent = new_parent;
      if (t->IsDir() || t->parent == new_parent) t->parent = parent;
    }
    t->ctime_ns = now;
  } else {
    if (t) {
      // The target name keeps its place in readdir order and now names the source.
      RepointEntry(m, new_parent, new_name, dst->cookie, *s);
      t->ctime_ns = now;
      if (t->IsDir()) {
        t->nlink = 0;
        --npdir->nlink;
      } else {
        --t->nlink;
      }
      RemoveEntry(m, parent, name, src);
    } else if (!cross) {
      // Within one directory the entry keeps its cookie, so a listing in progress neither
      // sees it twice nor misses it.
      m.batch().Delete(keys::DentryKey(parent, name));
      RepointEntry(m, parent, new_name, src.cookie, *s);
    } else {
      AddEntry(m, *npdir, new_name, *s);
      RemoveEntry(m, parent, name, src);
    }
    if (cross && s->IsDir()) --pdir->nlink, ++npdir->nlink;
    if (s->IsDir() || s->parent == parent) s->parent = new_parent;
  }
  s->ctime_ns = now;
  pdir->mtime_ns = pdir->ctime_ns = now;
  npdir->mtime_ns = npdir->ctime_ns = now;

  PutInode(m, *s);
  PutInode(m, *pdir);
  if (cross) PutInode(m, *npdir);
  if (t) {
    if (t->nlink == 0) {
      RETURN_IF_ERROR(DropOrOrphan(m, *t));
    } else {
      PutInode(m, *t);
    }
  }

  Event moved = MakeEvent(EVENT_RENAME, *s, parent, name);
  moved.set_new_parent(new_parent);
  moved.set_new_name(std::string(new_name));
  moved.set_parent_version(pdir->version);
  moved.set_new_parent_version(npdir->version);
  moved.set_exchange(t && exchange);
  m.Emit(std::move(moved));
  if (t && exchange) {
    Event back = MakeEvent(EVENT_RENAME, *t, new_parent, new_name);
    back.set_new_parent(parent);
    back.set_new_name(std::string(name));
    back.set_parent_version(npdir->version);
    back.set_new_parent_version(pdir->version);
    back.set_exchange(true);
    m.Emit(std::move(back));
  } else if (t) {
    // The replaced inode lost a link (and may be gone): its attributes changed.
    m.Emit(MakeEvent(EVENT_ATTR, *t, new_parent, new_name));
  }
  RETURN_IF_ERROR(m.Commit());

  RenameResult r;
  r.moved = s->ToAttr();
  if (t) {
    r.replaced = t->ToAttr();
    r.freed = m.FreedOf(t->ino);
  }
  return r;
}

}  // namespace kelp::filer
