#include "mount/fuse/fuse_context.h"

#include <cstring>

namespace kelp::mount::fuse {

void ToStat(const FuseContext& c, const Attr& a, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = c.ToFuse(a.ino());
  st->st_mode = a.mode();
  st->st_nlink = a.nlink();
  st->st_uid = a.uid();
  st->st_gid = a.gid();
  st->st_rdev = a.rdev();
  st->st_size = static_cast<off_t>(a.size());
  st->st_blksize = c.blksize;
  st->st_blocks = static_cast<blkcnt_t>((a.size() + 511) / 512);
  st->st_atim.tv_sec = a.atime_ns() / 1000000000;
  st->st_atim.tv_nsec = a.atime_ns() % 1000000000;
  st->st_mtim.tv_sec = a.mtime_ns() / 1000000000;
  st->st_mtim.tv_nsec = a.mtime_ns() % 1000000000;
  st->st_ctim.tv_sec = a.ctime_ns() / 1000000000;
  st->st_ctim.tv_nsec = a.ctime_ns() % 1000000000;
  if (st->st_atim.tv_nsec < 0) st->st_atim.tv_nsec += 1000000000, st->st_atim.tv_sec -= 1;
  if (st->st_mtim.tv_nsec < 0) st->st_mtim.tv_nsec += 1000000000, st->st_mtim.tv_sec -= 1;
  if (st->st_ctim.tv_nsec < 0) st->st_ctim.tv_nsec += 1000000000, st->st_ctim.tv_sec -= 1;
}

Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  Caller out;
  out.uid = c->uid;
  out.gid = c->gid;
  out.umask = c->umask;
  return out;
}

void ReplyStatus(fuse_req_t req, const absl::Status& s, const char* op) {
  int err = ErrnoOf(s);
  if (err == 0) {
    fuse_reply_err(req, 0);
    return;
  }
  if (err == EIO || err == ENOSPC || err == ETIMEDOUT) {
    spdlog::warn("fuse {}: {}", op, s);
    if (err == ETIMEDOUT) err = EIO;
  } else if (Ctx(req)->debug) {
    spdlog::debug("fuse {}: {}", op, s);
  }
  fuse_reply_err(req, err);
}

void ReplyEntry(fuse_req_t req, const Attr& a) {
  const FuseContext& c = *Ctx(req);
  fuse_entry_param e;
  std::memset(&e, 0, sizeof e);
  e.ino = c.ToFuse(a.ino());
  e.generation = a.generation();
  ToStat(c, a, &e.attr);
  e.attr_timeout = c.attr_timeout;
  e.entry_timeout = c.entry_timeout;
  fuse_reply_entry(req, &e);
}

absl::StatusOr<std::optional<uint32_t>> ModeToClearSuidGid(FuseContext& c, uint64_t ino) {
  auto cur = c.fs->GetAttr(ino);
  if (!cur.ok()) return cur.status();
  uint32_t mode = cur->mode() & 07777;
  if (ModeWithoutSuidGid(mode) == mode) return std::nullopt;
  return ModeWithoutSuidGid(mode);
}

void ReplyAttr(fuse_req_t req, const Attr& a) {
  const FuseContext& c = *Ctx(req);
  struct stat st;
  ToStat(c, a, &st);
  fuse_reply_attr(req, &st, c.attr_timeout);
}

}  // namespace kelp::mount::fuse
