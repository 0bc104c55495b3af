// Filesystem: names, attributes, xattrs, statfs.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <thread>

#include "filer/client/limits.h"
#include "mount/core/filesystem.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

absl::Status CheckName(std::string_view name) {
  if (name.size() > filer::kMaxNameLen) return PosixError(ENAMETOOLONG, "name too long");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Attr> Filesystem::Lookup(uint64_t parent, std::string_view name) {
  RETURN_IF_ERROR(CheckName(name));
  if (removes_.Has(parent, name)) return PosixError(ENOENT, "no such entry (unlinked, on its way to the filer)");
  if (auto e = cache_.GetEntry(parent, name)) {
    if (*e == 0) return PosixError(ENOENT, "no such entry (cached)");
    if (auto a = cache_.GetAttr(*e)) {
      inodes_.AddLookup(a->ino());
      return Overlay(*a);
    }
  }
  if (track_listings_) {
    uint64_t known = 0;
    switch (listings_.Find(parent, name, &known)) {
      case DirListings::Known::kAbsent:
        cache_.PutEntry(parent, name, 0);
        return PosixError(ENOENT, "no such entry (the directory's listing is known)");
      case DirListings::Known::kPresent:
        if (auto a = cache_.GetAttr(known)) {
          cache_.PutEntry(parent, name, known);
          inodes_.AddLookup(known);
          return Overlay(*a);
        }
        break;
      case DirListings::Known::kUnknown:
        break;
    }
  }
  auto a = meta_->Lookup(parent, name);
  if (!a.ok()) {
    if (ErrnoOf(a.status()) == ENOENT) cache_.PutEntry(parent, name, 0);
    return a.status();
  }
  cache_.PutEntry(parent, name, a->ino());
  Remember(*a);
  inodes_.AddLookup(a->ino());
  return Overlay(*a);
}

absl::StatusOr<Attr> Filesystem::GetAttr(uint64_t ino) {
  if (auto a = cache_.GetAttr(ino)) return Overlay(*a);
  ASSIGN_OR_RETURN(Attr a, meta_->GetAttr(ino));
  Remember(a);
  return Overlay(a);
}

absl::StatusOr<Attr> Filesystem::SetAttr(uint64_t ino, filer::SetAttrRequest req) {
  RETURN_IF_ERROR(CheckWritable());
  req.set_ino(ino);
  auto f = inodes_.File(ino);
  // A file this mount created and holds open: the change goes with the data at close or
  // fsync, in the same call (tar chowns, chmods and sets the times of each file it writes).
  if (f && f->SetAttrLocally(req)) return GetAttr(ino);
  // Writes made before this call come first (a later commit must not undo a truncate or
  // override an explicit mtime).
  if (f && f->HasLocalChanges()) RETURN_IF_ERROR(f->Flush(false));
  ASSIGN_OR_RETURN(Attr a, meta_->SetAttr(req));
  if (f) {
    if (req.valid() & filer::SET_ATTR_SIZE) {
      f->Truncated(a);
    } else {
      f->NoteOwnAttrChange(a);
    }
  }
  if (req.valid() & filer::SET_ATTR_SIZE) inodes_.SetCachedVersion(ino, a.version());
  if (S_ISDIR(a.mode())) listings_.Touched(ino, a.version());
  Remember(a);
  return Overlay(a);
}

std::optional<std::pair<uint32_t, uint32_t>> Filesystem::ParentModeGid(uint64_t parent) {
  if (auto mg = cache_.DirModeGid(parent)) return mg;
  auto a = GetAttr(parent);
  if (!a.ok()) return std::nullopt;
  return std::make_pair(a->mode(), a->gid());
}

absl::StatusOr<std::string> Filesystem::ReadLink(uint64_t ino) {
  ASSIGN_OR_RETURN(Attr a, GetAttr(ino));
  if (!S_ISLNK(a.mode())) return PosixError(EINVAL, "not a symlink");
  return a.symlink_target();
}

absl::StatusOr<Attr> Filesystem::MakeNode(uint64_t parent, std::string_view name, uint32_t mode, uint64_t rdev,
                                          const Caller& caller) {
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(CheckName(name));
  removes_.WaitDir(parent);  // the name may be one of them
  filer::CreateRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  uint32_t perm = mode & 07777 & ~opts_.umask;
  req.set_uid(caller.uid);
  req.set_gid(caller.gid);
  // BSD group semantics under a set-group-ID directory, as Linux filesystems do.
  if (auto p = ParentModeGid(parent); p && (p->first & S_ISGID)) {
    req.set_gid(p->second);
    if (S_ISDIR(mode)) perm |= S_ISGID;
  }
  req.set_mode((mode & S_IFMT) | perm);
  req.set_rdev(rdev);
  req.set_exclusive(true);
  Attr dir_after;
  auto created = meta_->Create(req, &dir_after);
  if (!created.ok()) {
    return created.status();
  }
  Attr a = *created;
  cache_.PutEntry(parent, name, a.ino());
  ListingAdded(parent, dir_after, name, a.ino());
  if (S_ISDIR(a.mode()) && track_listings_) listings_.Created(a.ino(), a.version());
  DirChanged(parent, dir_after);
  Remember(a);
  inodes_.AddLookup(a.ino());
  return a;
}

absl::StatusOr<Attr> Filesystem::Symlink(uint64_t parent, std::string_view name, std::string_view target,
                                         const Caller& caller) {
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(CheckName(name));
  if (target.size() > filer::kMaxSymlinkLen) return PosixError(ENAMETOOLONG, "symlink target too long");
  removes_.WaitDir(parent);
  filer::SymlinkRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_target(std::string(target));
  req.set_uid(caller.uid);
  req.set_gid(caller.gid);
  if (auto p = ParentModeGid(parent); p && (p->first & S_ISGID)) req.set_gid(p->second);
  Attr dir_after;
  auto made = meta_->Symlink(req, &dir_after);
  if (!made.ok()) {
    return made.status();
  }
  Attr a = *made;
  cache_.PutEntry(parent, name, a.ino());
  ListingAdded(parent, dir_after, name, a.ino());
  DirChanged(parent, dir_after);
  Remember(a);
  inodes_.AddLookup(a.ino());
  return a;
}

absl::StatusOr<Attr> Filesystem::Link(uint64_t ino, uint64_t new_parent, std::string_view new_name) {
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(CheckName(new_name));
  removes_.WaitDir(new_parent);
  Attr dir_after;
  auto linked = meta_->Link(ino, new_parent, new_name, &dir_after);
  if (!linked.ok()) {
    return linked.status();
  }
  Attr a = *linked;
  cache_.PutEntry(new_parent, new_name, a.ino());
  ListingAdded(new_parent, dir_after, new_name, a.ino());
  DirChanged(new_parent, dir_after);
  Remember(a);
  if (auto f = inodes_.File(ino)) f->NoteOwnAttrChange(a);
  inodes_.AddLookup(a.ino());
  return Overlay(a);
}

uint64_t Filesystem::UnlinkBehindIno(uint64_t parent, std::string_view name) {
  if (opts_.unlink_behind == 0 || stopped_) return 0;
  auto ino = cache_.GetEntry(parent, name);
  if (!ino || *ino == 0) return 0;
  auto a = cache_.GetAttr(*ino);
  // A directory is rmdir's; another link's nlink, and an open file's orphan, must change now.
  if (!a || S_ISDIR(a->mode()) || a->nlink() != 1) return 0;
  if (inodes_.File(*ino)) return 0;
  return *ino;
}

void Filesystem::Unlinked(uint64_t parent, std::string_view name, const Attr& unlinked, const Attr& dir_after) {
  cache_.PutEntry(parent, name, 0);
  ListingRemoved(parent, dir_after, name);
  DirChanged(parent, dir_after);
  if (unlinked.nlink() > 0) {
    Remember(unlinked);
  } else {
    cache_.DropAttr(unlinked.ino());
  }
  if (auto f = inodes_.File(unlinked.ino())) f->NoteOwnAttrChange(unlinked);
}

bool Filesystem::QueueUnlinkBehind(uint64_t parent, std::string_view name) {
  {
    MutexLock lock(unlink_mu_);
    if (unlink_stop_) return false;
    unlink_queue_.emplace_back(parent, std::string(name));
  }
  unlink_cv_.NotifyOne();
  return true;
}

void Filesystem::SendUnlinksBehind() {
  for (;;) {
    std::vector<NameInDir> batch;
    {
      MutexLock lock(unlink_mu_);
      while (unlink_queue_.empty() && !unlink_stop_) unlink_cv_.Wait(lock);
      if (unlink_queue_.empty()) return;  // stopping, and everything was sent
      // What came in while the last batch was out goes together.
      while (!unlink_queue_.empty() && batch.size() < kUnlinkBatch) {
        batch.push_back(std::move(unlink_queue_.front()));
        unlink_queue_.pop_front();
      }
    }
    SendUnlinkBatch(batch);
  }
}

void Filesystem::StopUnlinksBehind() {
  {
    MutexLock lock(unlink_mu_);
    unlink_stop_ = true;
  }
  unlink_cv_.NotifyAll();
  if (unlink_thread_.joinable()) unlink_thread_.join();
}

void Filesystem::SendUnlinkBatch(const std::vector<NameInDir>& batch) {
  filer::UnlinkBatchRequest req;
  for (const auto& [parent, name] : batch) {
    filer::UnlinkRequest* u = req.add_unlinks();
    u->set_parent(parent);
    u->set_name(name);
  }
  auto resp = meta_->UnlinkBatch(req);
  // The filer could not be reached: the batch goes again (an unlink that landed before finds
  // its name gone: ENOENT, its work done), for about 5 s.
  for (auto wait = std::chrono::milliseconds(10);
       !resp.ok() && absl::IsUnavailable(resp.status()) && wait <= std::chrono::milliseconds(2560); wait *= 2) {
    std::this_thread::sleep_for(wait);
    resp = meta_->UnlinkBatch(req);
  }
  if (resp.ok() && resp->results_size() != static_cast<int>(batch.size())) {
    resp = absl::InternalError(kelp::StrCat("the filer answered ", resp->results_size(), " of ", batch.size(),
                                            " unlinks"));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& [parent, name] = batch[i];
    Attr dir_after;
    if (!resp.ok()) {
      FinishUnlinkBehind(parent, name, resp.status(), dir_after);
      continue;
    }
    filer::UnlinkResult& r = *resp->mutable_results(static_cast<int>(i));
    if (r.errno_value() != 0) {
      FinishUnlinkBehind(parent, name, PosixError(r.errno_value(), r.error()), dir_after);
      continue;
    }
    if (r.done().has_parent_attr()) dir_after = std::move(*r.mutable_done()->mutable_parent_attr());
    fetcher_->Forget(r.done().freed());
    FinishUnlinkBehind(parent, name, std::move(*r.mutable_done()->mutable_attr()), dir_after);
  }
}

void Filesystem::FinishUnlinkBehind(uint64_t parent, const std::string& name, const absl::StatusOr<Attr>& unlinked,
                                    const Attr& dir_after) {
  if (unlinked.ok()) {
    Unlinked(parent, name, *unlinked, dir_after);
  } else {
    // ENOENT: someone removed it first, what the program was told holds. Anything else: the
    // name is still there, and shown again.
    if (ErrnoOf(unlinked.status()) != ENOENT) {
      unlinks_behind_failed_->Inc();
      spdlog::warn("unlink of {} in directory {}, answered before the filer had it, failed: {}",
                   name, parent, unlinked.status());
    }
    cache_.DropEntry(parent, name);
    cache_.DropAttr(parent);
    listings_.Forget(parent);
  }
  removes_.Done(parent, name);
}

absl::Status Filesystem::Unlink(uint64_t parent, std::string_view name) {
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(CheckName(name));
  if (uint64_t ino = UnlinkBehindIno(parent, name)) {
    removes_.Add(parent, name);
    cache_.PutEntry(parent, name, 0);
    cache_.DropAttr(ino);
    if (auto dir = cache_.GetAttr(parent)) {
      // What the filer will set; the kernel asks for the directory's attributes after every
      // unlink (its permission check), and this answers without waiting.
      int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
      dir->set_mtime_ns(now);
      dir->set_ctime_ns(now);
      cache_.PutAttr(*dir);
    }
    unlinks_behind_->Inc();
    if (!QueueUnlinkBehind(parent, name)) SendUnlinkBatch({NameInDir(parent, std::string(name))});
    return absl::OkStatus();
  }
  Attr dir_after;
  google::protobuf::RepeatedPtrField<filer::FreedBlob> freed;
  auto a = meta_->Unlink(parent, name, &dir_after, &freed);
  cache_.DropEntry(parent, name);
  if (!a.ok()) {
    return a.status();
  }
  fetcher_->Forget(freed);
  Unlinked(parent, name, *a, dir_after);
  return absl::OkStatus();
}

absl::Status Filesystem::Rmdir(uint64_t parent, std::string_view name) {
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(CheckName(name));
  removes_.WaitAll();  // the directory's own entries among them (ENOTEMPTY otherwise)
  Attr dir_after;
  absl::Status s = meta_->Rmdir(parent, name, &dir_after);
  cache_.DropEntry(parent, name);
  if (!s.ok()) {
    return s;
  }
  cache_.PutEntry(parent, name, 0);
  ListingRemoved(parent, dir_after, name);
  DirChanged(parent, dir_after);
  return absl::OkStatus();
}

absl::Status Filesystem::Rename(uint64_t parent, std::string_view name, uint64_t new_parent,
                                std::string_view new_name, uint32_t flags) {
  RETURN_IF_ERROR(CheckWritable());
  RETURN_IF_ERROR(CheckName(name));
  RETURN_IF_ERROR(CheckName(new_name));
  removes_.WaitAll();  // either name, or the entries of a directory replaced, may be among them
  filer::RenameRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_new_parent(new_parent);
  req.set_new_name(std::string(new_name));
  req.set_flags(flags);
  auto r = meta_->Rename(req);
  cache_.DropEntry(parent, name);
  cache_.DropEntry(new_parent, new_name);
  if (!r.ok()) {
    return r.status();
  }
  if (r->parent_attr().ino() == parent && r->new_parent_attr().ino() == new_parent) {
    ListingRenamed(parent, r->parent_attr().version(), name, new_parent, r->new_parent_attr().version(), new_name,
                   r->moved().ino(), (flags & 2 /* RENAME_EXCHANGE */) != 0);
  } else {
    listings_.Forget(parent);
    listings_.Forget(new_parent);
  }
  fetcher_->Forget(r->freed());
  if (S_ISDIR(r->moved().mode())) listings_.Touched(r->moved().ino(), r->moved().version());
  if (r->has_replaced() && S_ISDIR(r->replaced().mode()) && !(flags & 2)) listings_.Forget(r->replaced().ino());
  DirChanged(parent, r->parent_attr());
  DirChanged(new_parent, r->new_parent_attr());
  if (r->has_moved() && r->moved().ino() != 0) {
    Remember(r->moved());
    if (!(flags & 2 /* RENAME_EXCHANGE */)) {
      cache_.PutEntry(new_parent, new_name, r->moved().ino());
      cache_.PutEntry(parent, name, 0);
    }
    // A moved directory's ".." changed.
    if (S_ISDIR(r->moved().mode())) cache_.DropEntry(r->moved().ino(), "..");
  }
  if (r->has_replaced() && r->replaced().ino() != 0) {
    if (r->replaced().nlink() > 0) {
      Remember(r->replaced());
    } else {
      cache_.DropAttr(r->replaced().ino());
    }
  }
  return absl::OkStatus();
}

namespace {

// Names this file system does not support, refused with EOPNOTSUPP as by a file system mounted
// without them (docs/mount.md, "Extended attributes"):
// - security.selinux: on a FUSE mount the kernel labels files by policy (genfs), never by this
//   attribute.
// - The POSIX ACLs: the mount does not ask for FUSE_POSIX_ACL, so the kernel would store them
//   and never check them (permissions are the mode bits, `default_permissions`). An ACL that
//   grants and denies nothing would mislead; `setfacl` says "not supported" instead.
// GNU `ls -l` remembers EOPNOTSUPP per device (never ENODATA) and stops asking after the first
// entry, where it sent one GETXATTR per entry for each of these names.
constexpr std::string_view kUnsupportedXattrs[] = {"security.selinux", "system.posix_acl_access",
                                                   "system.posix_acl_default"};

bool Unsupported(std::string_view name) {
  return std::ranges::find(kUnsupportedXattrs, name) != std::end(kUnsupportedXattrs);
}

absl::Status UnsupportedError(std::string_view name) {
  return PosixError(EOPNOTSUPP, kelp::StrCat(name, ": not supported (kelp keeps no SELinux labels "
                                                   "and no POSIX ACLs)"));
}

}  // namespace

absl::StatusOr<std::string> Filesystem::GetXattr(uint64_t ino, std::string_view name) {
  if (Unsupported(name)) return UnsupportedError(name);
  if (cache_.HasNoXattr(ino, name)) return PosixError(ENODATA, "no such attribute (cached)");
  auto v = meta_->GetXattr(ino, name);
  if (!v.ok() && ErrnoOf(v.status()) == ENODATA) cache_.PutNoXattr(ino, name);
  return v;
}

absl::Status Filesystem::SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags) {
  if (Unsupported(name)) return UnsupportedError(name);
  RETURN_IF_ERROR(CheckWritable());
  absl::Status s = meta_->SetXattr(ino, name, value, flags);
  listings_.Forget(ino);  // a directory's version moved on, to a number the reply does not say
  cache_.DropAttr(ino);  // ctime
  cache_.DropXattrs(ino);
  return s;
}

absl::StatusOr<std::vector<std::string>> Filesystem::ListXattr(uint64_t ino) {
  if (cache_.HasNoXattrs(ino)) return std::vector<std::string>();
  ASSIGN_OR_RETURN(std::vector<std::string> names, meta_->ListXattr(ino));
  std::erase_if(names, Unsupported);  // one stored through the HTTP API is not shown either
  return names;
}

absl::Status Filesystem::RemoveXattr(uint64_t ino, std::string_view name) {
  if (Unsupported(name)) return UnsupportedError(name);
  RETURN_IF_ERROR(CheckWritable());
  absl::Status s = meta_->RemoveXattr(ino, name);
  listings_.Forget(ino);
  cache_.DropAttr(ino);
  cache_.DropXattrs(ino);
  return s;
}

absl::StatusOr<filer::StatFsResponse> Filesystem::StatFs() { return meta_->StatFs(); }

}  // namespace kelp::mount
