// FUSE callbacks for directories: opendir, readdir, readdirplus, releasedir, fsyncdir.
#include <cstring>
#include <memory>

#include "mount/fuse/fuse_context.h"

namespace kelp::mount::fuse {
namespace {

void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Guarded(req, "opendir", [&] {
    FuseContext& c = *Ctx(req);
    auto h = c.fs->OpenDir(c.ToFiler(ino));
    if (!h.ok()) return ReplyStatus(req, h.status(), "opendir");
    fi->fh = *h;
    if (fuse_reply_open(req, fi) != 0) c.fs->ReleaseDir(*h);
  });
}

void List(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  FuseContext& c = *Ctx(req);
  std::unique_ptr<char[]> buf(new char[size]);
  size_t used = 0;
  auto add = [&](const Filesystem::DirItem& item) -> bool {
    size_t n;
    if (plus) {
      fuse_entry_param e;
      std::memset(&e, 0, sizeof e);
      bool dots = item.name == "." || item.name == "..";
      if (item.attr != nullptr && !dots) {
        e.ino = c.ToFuse(item.ino);
        e.generation = item.attr->generation();
        ToStat(c, *item.attr, &e.attr);
        e.attr_timeout = c.attr_timeout;
        e.entry_timeout = c.entry_timeout;
      } else {
        e.attr.st_ino = c.ToFuse(item.ino);
        e.attr.st_mode = item.type;
      }
      n = fuse_add_direntry_plus(req, buf.get() + used, size - used, item.name.c_str(), &e,
                                 static_cast<off_t>(item.next_offset));
      if (n > size - used) return false;
      // The kernel counts a lookup for every entry with attributes it got (not . and ..).
      if (e.ino != 0) c.fs->NoteLookup(item.ino);
    } else {
      struct stat st;
      std::memset(&st, 0, sizeof st);
      st.st_ino = c.ToFuse(item.ino);
      st.st_mode = item.type;
      n = fuse_add_direntry(req, buf.get() + used, size - used, item.name.c_str(), &st,
                            static_cast<off_t>(item.next_offset));
      if (n > size - used) return false;
    }
    used += n;
    return true;
  };
  absl::Status s = c.fs->ReadDir(fi->fh, static_cast<uint64_t>(off), plus, add);
  if (!s.ok() && used == 0) return ReplyStatus(req, s, plus ? "readdirplus" : "readdir");
  fuse_reply_buf(req, buf.get(), used);
}

void ReadDir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  Guarded(req, "readdir", [&] { List(req, size, off, fi, false); });
}

void ReadDirPlus(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  Guarded(req, "readdirplus", [&] { List(req, size, off, fi, true); });
}

void ReleaseDir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  Guarded(req, "releasedir", [&] {
    Ctx(req)->fs->ReleaseDir(fi->fh);
    fuse_reply_err(req, 0);
  });
}

void FsyncDir(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  Guarded(req, "fsyncdir", [&] { ReplyStatus(req, Ctx(req)->fs->FsyncDir(Ctx(req)->ToFiler(ino)), "fsyncdir"); });
}

}  // namespace

void AddDirOps(fuse_lowlevel_ops* ops) {
  ops->opendir = OpenDir;
  ops->readdir = ReadDir;
  ops->readdirplus = ReadDirPlus;
  ops->releasedir = ReleaseDir;
  ops->fsyncdir = FsyncDir;
}

}  // namespace kelp::mount::fuse
