// FUSE callbacks for the session (init, destroy), statfs and extended attributes.
#include <sys/statvfs.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "mount/fuse/fuse_context.h"

namespace kelp::mount::fuse {
namespace {

void Init(void* userdata, fuse_conn_info* conn) {
  auto* c = static_cast<FuseContext*>(userdata);
  conn->max_write = 1 << 20;
  conn->max_readahead = std::max<unsigned>(conn->max_readahead, 1 << 20);
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  auto want = [&](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_READDIRPLUS);
  // Every listing with attributes: ls -l, rm -rf, du and find then cost no LOOKUP per entry.
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  want(FUSE_CAP_PARALLEL_DIROPS);
  want(FUSE_CAP_CACHE_SYMLINKS);
  // Locks stay local to this mount's kernel (no lock callbacks): flock and fcntl work among
  // the processes of one machine.
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
  conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;  // V2 instead, when the kernel offers it (raw_io.h)
  conn->want &= ~FUSE_CAP_SPLICE_READ;      // the device hook reads each request with read(2)
  // Page-cache invalidation is explicit: keep_cache on open (close-to-open by version) and
  // notify_inval_inode from the event stream. Automatic invalidation on every mtime change
  // would drop the pages of a file after each of this mount's own writes.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  if (c->writeback_cache) {
    want(FUSE_CAP_WRITEBACK_CACHE);
  } else {
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  }
}

void Destroy(void* userdata) {
  auto* c = static_cast<FuseContext*>(userdata);
  try {
    absl::Status s = c->fs->FlushAll();
    if (!s.ok()) spdlog::error("flush at unmount: {}", s);
  } catch (const std::exception& e) {
    spdlog::error("destroy: {}", e.what());
  }
}

void StatFs(fuse_req_t req, fuse_ino_t) {
  Guarded(req, "statfs", [&] {
    auto r = Ctx(req)->fs->StatFs();
    if (!r.ok()) return ReplyStatus(req, r.status(), "statfs");
    struct statvfs st;
    std::memset(&st, 0, sizeof st);
    st.f_bsize = r->block_size() ? r->block_size() : 4096;
    st.f_frsize = st.f_bsize;
    st.f_blocks = r->total_blocks();
    st.f_bfree = r->free_blocks();
    st.f_bavail = r->free_blocks();
    st.f_files = r->total_files();
    st.f_ffree = r->free_files();
    st.f_favail = r->free_files();
    st.f_namemax = r->name_max() ? r->name_max() : 255;
    fuse_reply_statfs(req, &st);
  });
}

void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  Guarded(req, "setxattr", [&] {
    FuseContext& c = *Ctx(req);
    ReplyStatus(req, c.fs->SetXattr(c.ToFiler(ino), name, std::string_view(value, size), flags), "setxattr");
  });
}

void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  Guarded(req, "getxattr", [&] {
    FuseContext& c = *Ctx(req);
    auto v = c.fs->GetXattr(c.ToFiler(ino), name);
    if (!v.ok()) {
      int err = ErrnoOf(v.status());
      if (err == ENOENT) {
        // A missing attribute is ENODATA (the filer may say NOT_FOUND without an errno).
        fuse_reply_err(req, ENODATA);
        return;
      }
      return ReplyStatus(req, v.status(), "getxattr");
    }
    if (size == 0) {
      fuse_reply_xattr(req, v->size());
    } else if (v->size() > size) {
      fuse_reply_err(req, ERANGE);
    } else {
      fuse_reply_buf(req, v->data(), v->size());
    }
  });
}

void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  Guarded(req, "listxattr", [&] {
    FuseContext& c = *Ctx(req);
    auto names = c.fs->ListXattr(c.ToFiler(ino));
    if (!names.ok()) return ReplyStatus(req, names.status(), "listxattr");
    std::string out;
    for (const auto& n : *names) {
      out += n;
      out.push_back('\0');
    }
    if (size == 0) {
      fuse_reply_xattr(req, out.size());
    } else if (out.size() > size) {
      fuse_reply_err(req, ERANGE);
    } else {
      fuse_reply_buf(req, out.data(), out.size());
    }
  });
}

void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  Guarded(req, "removexattr", [&] {
    FuseContext& c = *Ctx(req);
    absl::Status s = c.fs->RemoveXattr(c.ToFiler(ino), name);
    if (ErrnoOf(s) == ENOENT) {
      fuse_reply_err(req, ENODATA);
      return;
    }
    ReplyStatus(req, s, "removexattr");
  });
}

}  // namespace

void AddMiscOps(fuse_lowlevel_ops* ops) {
  ops->init = Init;
  ops->destroy = Destroy;
  ops->statfs = StatFs;
  ops->setxattr = SetXattr;
  ops->getxattr = GetXattr;
  ops->listxattr = ListXattr;
  ops->removexattr = RemoveXattr;
}

}  // namespace kelp::mount::fuse
