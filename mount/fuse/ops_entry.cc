// FUSE callbacks for names and attributes: lookup, forget, getattr, setattr, readlink, mknod,
// mkdir, unlink, rmdir, symlink, rename, link.
#include <cstring>
#include <exception>

#include "mount/fuse/fuse_context.h"
#include "shared/log.h"

namespace kelp::mount::fuse {
namespace {

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "lookup", [&] {
    FuseContext& c = *Ctx(req);
    auto a = c.fs->Lookup(c.ToFiler(parent), name);
    if (!a.ok() && ErrnoOf(a.status()) == ENOENT && c.entry_timeout > 0) {
      // A negative entry the kernel may cache for entry_timeout.
      fuse_entry_param e;
      std::memset(&e, 0, sizeof e);
      e.entry_timeout = c.entry_timeout;
      fuse_reply_entry(req, &e);
      return;
    }
    if (!a.ok()) return ReplyStatus(req, a.status(), "lookup");
    ReplyEntry(req, *a);
  });
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  try {
    FuseContext& c = *Ctx(req);
    c.fs->Forget(c.ToFiler(ino), nlookup);
  } catch (const std::exception& e) {
    // FORGET has no reply to carry an error: the kernel's lookup count for ino stays high.
    spdlog::error("forget of inode {}: {}", ino, e.what());
  } catch (...) {
    spdlog::error("forget of inode {}: unknown exception", ino);
  }
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  try {
    FuseContext& c = *Ctx(req);
    for (size_t i = 0; i < count; ++i) c.fs->Forget(c.ToFiler(forgets[i].ino), forgets[i].nlookup);
  } catch (const std::exception& e) {
    // FORGET has no reply to carry an error: the inodes not reached keep their lookup counts.
    spdlog::error("forget of {} inodes: {}", count, e.what());
  } catch (...) {
    spdlog::error("forget of {} inodes: unknown exception", count);
  }
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Guarded(req, "getattr", [&] {
    FuseContext& c = *Ctx(req);
    auto a = c.fs->GetAttr(c.ToFiler(ino));
    if (!a.ok()) return ReplyStatus(req, a.status(), "getattr");
    ReplyAttr(req, *a);
  });
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* st, int to_set, fuse_file_info*) {
  Guarded(req, "setattr", [&] {
    FuseContext& c = *Ctx(req);
    filer::SetAttrRequest r;
    uint32_t valid = 0;
    if (to_set & FUSE_SET_ATTR_MODE) valid |= filer::SET_ATTR_MODE, r.set_mode(st->st_mode & 07777);
    if (to_set & FUSE_SET_ATTR_UID) valid |= filer::SET_ATTR_UID, r.set_uid(st->st_uid);
    if (to_set & FUSE_SET_ATTR_GID) valid |= filer::SET_ATTR_GID, r.set_gid(st->st_gid);
    if (to_set & FUSE_SET_ATTR_SIZE) valid |= filer::SET_ATTR_SIZE, r.set_size(st->st_size);
    if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
      valid |= filer::SET_ATTR_ATIME_NOW;
    } else if (to_set & FUSE_SET_ATTR_ATIME) {
      valid |= filer::SET_ATTR_ATIME;
      r.set_atime_ns(st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec);
    }
    if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
      valid |= filer::SET_ATTR_MTIME_NOW;
    } else if (to_set & FUSE_SET_ATTR_MTIME) {
      valid |= filer::SET_ATTR_MTIME;
      r.set_mtime_ns(st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
    }
    if (to_set & FUSE_SET_ATTR_CTIME) {
      valid |= filer::SET_ATTR_CTIME;
      r.set_ctime_ns(st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec);
    }
    if (RequestKillsSuidGid() && (valid & filer::SET_ATTR_MODE) == 0) {
      // A truncate by a process without CAP_FSETID, or a chown of anything but a directory: the
      // same filer call clears the bits.
      auto mode = ModeToClearSuidGid(c, c.ToFiler(ino));
      if (!mode.ok()) return ReplyStatus(req, mode.status(), "setattr");
      if (*mode) {
        valid |= filer::SET_ATTR_MODE;
        r.set_mode(**mode);
      }
    }
    r.set_valid(valid);
    auto a = c.fs->SetAttr(c.ToFiler(ino), r);
    if (!a.ok()) return ReplyStatus(req, a.status(), "setattr");
    ReplyAttr(req, *a);
  });
}

void ReadLink(fuse_req_t req, fuse_ino_t ino) {
  Guarded(req, "readlink", [&] {
    FuseContext& c = *Ctx(req);
    auto t = c.fs->ReadLink(c.ToFiler(ino));
    if (!t.ok()) return ReplyStatus(req, t.status(), "readlink");
    fuse_reply_readlink(req, t->c_str());
  });
}

void MakeNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev, const char* op) {
  Guarded(req, op, [&] {
    FuseContext& c = *Ctx(req);
    auto a = c.fs->MakeNode(c.ToFiler(parent), name, mode, rdev, CallerOf(req));
    if (!a.ok()) return ReplyStatus(req, a.status(), op);
    ReplyEntry(req, *a);
  });
}

void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  MakeNode(req, parent, name, mode, rdev, "mknod");
}

void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  MakeNode(req, parent, name, S_IFDIR | (mode & 07777), 0, "mkdir");
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "unlink", [&] {
    FuseContext& c = *Ctx(req);
    ReplyStatus(req, c.fs->Unlink(c.ToFiler(parent), name), "unlink");
  });
}

void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Guarded(req, "rmdir", [&] {
    FuseContext& c = *Ctx(req);
    ReplyStatus(req, c.fs->Rmdir(c.ToFiler(parent), name), "rmdir");
  });
}

void Symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  Guarded(req, "symlink", [&] {
    FuseContext& c = *Ctx(req);
    auto a = c.fs->Symlink(c.ToFiler(parent), name, target, CallerOf(req));
    if (!a.ok()) return ReplyStatus(req, a.status(), "symlink");
    ReplyEntry(req, *a);
  });
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent, const char* new_name,
            unsigned int flags) {
  Guarded(req, "rename", [&] {
    FuseContext& c = *Ctx(req);
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
      fuse_reply_err(req, EINVAL);
      return;
    }
    ReplyStatus(req, c.fs->Rename(c.ToFiler(parent), name, c.ToFiler(new_parent), new_name, flags), "rename");
  });
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) {
  Guarded(req, "link", [&] {
    FuseContext& c = *Ctx(req);
    auto a = c.fs->Link(c.ToFiler(ino), c.ToFiler(new_parent), new_name);
    if (!a.ok()) return ReplyStatus(req, a.status(), "link");
    ReplyEntry(req, *a);
  });
}

}  // namespace

void AddEntryOps(fuse_lowlevel_ops* ops) {
  ops->lookup = Lookup;
  ops->forget = Forget;
  ops->forget_multi = ForgetMulti;
  ops->getattr = GetAttr;
  ops->setattr = SetAttr;
  ops->readlink = ReadLink;
  ops->mknod = Mknod;
  ops->mkdir = Mkdir;
  ops->unlink = Unlink;
  ops->rmdir = Rmdir;
  ops->symlink = Symlink;
  ops->rename = Rename;
  ops->link = Link;
}

}  // namespace kelp::mount::fuse
