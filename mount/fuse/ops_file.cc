// FUSE callbacks for open files: open, create, read, write, flush, release, fsync.
#include <fcntl.h>

#include <memory>

#include "mount/fuse/fuse_context.h"
#include "mount/fuse/uring_loop.h"

namespace kelp::mount::fuse {
namespace {

void SetOpenFlags(fuse_file_info* fi, const OpenResult& r) {
  fi->fh = r.fh;
  fi->keep_cache = r.keep_cache ? 1 : 0;
  fi->direct_io = 0;
  // Nothing to flush through a read-only descriptor: its close costs no FLUSH round trip
  // (the kernel skips it; the release still comes).
  fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY ? 1 : 0;
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Guarded(req, "open", [&] {
    FuseContext& c = *Ctx(req);
    auto r = c.fs->Open(c.ToFiler(ino), fi->flags);
    if (!r.ok()) return ReplyStatus(req, r.status(), "open");
    SetOpenFlags(fi, *r);
    if (fuse_reply_open(req, fi) != 0) c.fs->Release(r->fh).IgnoreError();  // interrupted: undo
  });
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  Guarded(req, "create", [&] {
    FuseContext& c = *Ctx(req);
    auto r = c.fs->Create(c.ToFiler(parent), name, mode, fi->flags, CallerOf(req));
    if (!r.ok()) return ReplyStatus(req, r.status(), "create");
    SetOpenFlags(fi, *r);
    fuse_entry_param e;
    std::memset(&e, 0, sizeof e);
    e.ino = c.ToFuse(r->attr.ino());
    e.generation = r->attr.generation();
    ToStat(c, r->attr, &e.attr);
    e.attr_timeout = c.attr_timeout;
    e.entry_timeout = c.entry_timeout;
    if (fuse_reply_create(req, &e, fi) != 0) {
      c.fs->Release(r->fh).IgnoreError();
      c.fs->Forget(r->attr.ino(), 1);
    }
  });
}

void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  Guarded(req, "read", [&] {
    FuseContext& c = *Ctx(req);
    // Over the ring, the bytes go straight into the entry the reply is committed from.
    char* dst = UringLoop::ReplyBuffer(size);
    std::unique_ptr<char[]> own;
    if (dst == nullptr) {
      own.reset(new char[size > 0 ? size : 1]);
      dst = own.get();
    }
    auto n = c.fs->Read(fi->fh, static_cast<uint64_t>(off), size, dst);
    if (!n.ok()) return ReplyStatus(req, n.status(), "read");
    fuse_reply_buf(req, dst, *n);
  });
}

void Write(fuse_req_t req, fuse_ino_t ino, const char* data, size_t size, off_t off, fuse_file_info* fi) {
  Guarded(req, "write", [&] {
    FuseContext& c = *Ctx(req);
    bool cleared = false;
    if (RequestKillsSuidGid()) {
      auto mode = ModeToClearSuidGid(c, c.ToFiler(ino));
      if (!mode.ok()) return ReplyStatus(req, mode.status(), "write");
      if (*mode) {
        filer::SetAttrRequest r;
        r.set_valid(filer::SET_ATTR_MODE);
        r.set_mode(**mode);
        auto a = c.fs->SetAttr(c.ToFiler(ino), r);
        if (!a.ok()) return ReplyStatus(req, a.status(), "write");
        cleared = true;
      }
    }
    absl::Status s = c.fs->Write(fi->fh, static_cast<uint64_t>(off), std::string_view(data, size));
    if (!s.ok()) return ReplyStatus(req, s, "write");
    fuse_reply_write(req, size);
    // The kernel keeps the mode it had (a WRITE reply carries no attributes): tell it, after the
    // reply, so an exec does not see the old suid bit.
    if (cleared) fuse_lowlevel_notify_inval_inode(c.se, ino, -1, 0);
  });
}

void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Guarded(req, "flush", [&] { ReplyStatus(req, Ctx(req)->fs->Flush(fi->fh), "flush"); });
}

void Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Guarded(req, "release", [&] { ReplyStatus(req, Ctx(req)->fs->Release(fi->fh), "release"); });
}

void Fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
  Guarded(req, "fsync", [&] { ReplyStatus(req, Ctx(req)->fs->Fsync(fi->fh, datasync != 0), "fsync"); });
}

}  // namespace

void AddFileOps(fuse_lowlevel_ops* ops) {
  ops->open = Open;
  ops->create = Create;
  ops->read = Read;
  ops->write = Write;
  ops->flush = Flush;
  ops->release = Release;
  ops->fsync = Fsync;
}

}  // namespace kelp::mount::fuse
