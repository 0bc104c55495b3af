#include "filer/http/file_ops.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "filer/client/limits.h"
#include "filer/http/content.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

bool IsDir(const Attr& a) { return S_ISDIR(a.mode()); }

absl::Status RootError(std::string_view what) {
  return PosixError(EPERM, StrCat("cannot ", what, " the root directory"));
}

}  // namespace

FileOps::FileOps(FilerService* fs, volume::BlobStore* io, Options options)
    : fs_(fs), io_(io), opts_(options), uid_(getuid()), gid_(getgid()) {}

CreateArgs FileOps::Entry(uint64_t parent, std::string_view name, uint32_t mode,
                          bool exclusive) const {
  CreateArgs a;
  a.parent = parent;
  a.name = std::string(name);
  a.mode = mode;
  a.uid = uid_;
  a.gid = gid_;
  a.exclusive = exclusive;
  return a;
}

absl::StatusOr<Attr> FileOps::ResolveDir(std::string_view path) {
  auto a = fs_->ResolvePath(path);
  if (!a.ok()) {
    if (ErrnoOf(a.status()) == ENOENT)
      return PosixError(ENOENT, StrCat("no such directory: ", path));
    return a.status();
  }
  if (!IsDir(*a)) return PosixError(ENOTDIR, StrCat("not a directory: ", path));
  return a;
}

absl::StatusOr<Attr> FileOps::MkdirAll(std::string_view path, uint32_t mode) {
  // The common case: it is there already.
  auto whole = fs_->ResolvePath(path);
  if (whole.ok()) {
    if (!IsDir(*whole)) return PosixError(ENOTDIR, StrCat("not a directory: ", path));
    return whole;
  }
  if (ErrnoOf(whole.status()) != ENOENT) return whole.status();
  ASSIGN_OR_RETURN(Attr cur, fs_->GetAttr(1));
  size_t pos = 1;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view comp = path.substr(pos, slash - pos);
    pos = slash + 1;
    auto next = fs_->Lookup(cur.ino(), comp);
    if (!next.ok() && ErrnoOf(next.status()) == ENOENT) {
      next = fs_->Create(Entry(cur.ino(), comp, S_IFDIR | (mode & 07777), false));
      if (!next.ok() && ErrnoOf(next.status()) == EEXIST)
        next = fs_->Lookup(cur.ino(), comp);  // raced
    }
    if (!next.ok()) return next.status();
    if (!IsDir(*next)) {
      return PosixError(ENOTDIR, StrCat("not a directory: ", path.substr(0, slash)));
    }
    cur = *next;
  }
  return cur;
}

absl::StatusOr<Attr> FileOps::Mkdir(const CleanPath& p, uint32_t mode) {
  if (p.is_root()) return PosixError(EEXIST, "the root directory exists");
  ASSIGN_OR_RETURN(Attr parent, ResolveDir(p.dir()));
  return fs_->Create(Entry(parent.ino(), p.name(), S_IFDIR | (mode & 07777), false));
}

absl::StatusOr<Attr> FileOps::CreateFile(const CleanPath& p, bool exclusive) {
  if (p.is_root()) return PosixError(EISDIR, "the root is a directory");
  ASSIGN_OR_RETURN(Attr parent, ResolveDir(p.dir()));
  return fs_->Create(Entry(parent.ino(), p.name(), S_IFREG | opts_.file_mode, exclusive));
}

absl::StatusOr<Attr> FileOps::OpenForWrite(const CleanPath& p, const FileWrite& w, bool* created) {
  *created = false;
  if (p.is_root() || p.trailing_slash)
    return PosixError(EISDIR, StrCat("is a directory: ", p.path));
  auto existing = fs_->ResolvePath(p.path);
  if (existing.ok()) {
    if (IsDir(*existing)) return PosixError(EISDIR, StrCat("is a directory: ", p.path));
    if (w.exclusive) return PosixError(EEXIST, StrCat("file exists: ", p.path));
    if (!S_ISREG(existing->mode()))
      return PosixError(EINVAL, StrCat("not a regular file: ", p.path));
    return existing;
  }
  if (ErrnoOf(existing.status()) != ENOENT) return existing.status();
  if (!w.create) return PosixError(ENOENT, StrCat("no such file: ", p.path));
  Attr parent;
  if (w.make_parents) {
    ASSIGN_OR_RETURN(parent, MkdirAll(p.dir(), opts_.dir_mode));
  } else {
    ASSIGN_OR_RETURN(parent, ResolveDir(p.dir()));
  }
  ASSIGN_OR_RETURN(
      Attr f, fs_->Create(Entry(parent.ino(), p.name(), S_IFREG | opts_.file_mode, w.exclusive)));
  *created = true;
  return f;
}

absl::StatusOr<FileWriteResult> FileOps::Write(const CleanPath& p, BodySource& body,
                                               const FileWrite& w) {
  bool created = false;
  ASSIGN_OR_RETURN(Attr file, OpenForWrite(p, w, &created));
  auto r = WriteBody(file, body, w);
  if (!r.ok() && created) {
    // Leave nothing half-made behind for a write that failed (a client that went away).
    auto parent = fs_->ResolvePath(p.dir());
    if (parent.ok()) (void)fs_->Unlink(parent->ino(), p.name());
    return r.status();
  }
  if (r.ok() && !w.mime.empty()) {
    RETURN_IF_ERROR(fs_->SetXattr(r->attr.ino(), kMimeXattr, w.mime, 0));
  }
  return r;
}

absl::StatusOr<FileWriteResult> FileOps::WriteBody(const Attr& file, BodySource& body,
                                                   const FileWrite& w) {
  const uint64_t ino = file.ino();
  const bool replace = w.mode == FileWrite::Mode::kReplace;
  const uint64_t base = w.mode == FileWrite::Mode::kAppend ? file.size() : w.offset;
  if (base > kMaxFileSize) return PosixError(EFBIG, "offset beyond the largest file size");
  std::string head;
  head.reserve(kMaxInlineSize + 1);
  RETURN_IF_ERROR(ReadUpTo(body, kMaxInlineSize + 1, &head));
  const bool small = head.size() <= kMaxInlineSize;  // and so the whole body
  FileWriteResult out;

  if (small && replace && (base == 0 || head.empty())) {
    ASSIGN_OR_RETURN(out.attr, fs_->WriteInline(ino, head, 0, w.sync));
    out.written = head.size();
    return out;
  }
  if (small && !replace && head.empty()) {
    if (w.sync) RETURN_IF_ERROR(fs_->Fsync(ino));
    ASSIGN_OR_RETURN(out.attr, fs_->GetAttr(ino));
    return out;
  }
  if (small && !replace && base + head.size() <= kMaxInlineSize && file.size() <= kMaxInlineSize) {
    // A small edit of a small inline file stays inline: merge and rewrite it.
    ASSIGN_OR_RETURN(GetChunksResponse g, fs_->GetChunks(ino));
    if (InlineOnly(g) && g.attr().size() <= kMaxInlineSize) {
      std::string merged = g.inline_data();
      merged.resize(std::max<uint64_t>(g.attr().size(), base + head.size()), '\0');
      merged.replace(base, head.size(), head);
      ASSIGN_OR_RETURN(out.attr, fs_->WriteInline(ino, merged, 0, w.sync));
      out.written = head.size();
      return out;
    }
  }
  ASSIGN_OR_RETURN(UploadedBlobs up,
                   UploadBlobs(head, body, base, opts_.blob_size, w.size_hint, *io_));
  CommitChunksRequest req;
  req.set_ino(ino);
  for (auto& c : up.chunks) *req.add_chunks() = c;
  req.set_min_size(base + up.bytes);
  req.set_replace(replace);
  req.set_sync(w.sync);
  auto committed = fs_->CommitChunks(req);
  if (!committed.ok()) {
    std::vector<std::string> fids;
    for (const auto& c : up.chunks) fids.push_back(c.fid());
    io_->Discard(fids);
    return committed.status();
  }
  out.attr = committed->attr();
  out.written = up.bytes;
  return out;
}

absl::Status FileOps::Remove(const CleanPath& p, bool recursive) {
  if (p.is_root()) return RootError("remove");
  ASSIGN_OR_RETURN(Attr parent, ResolveDir(p.dir()));
  if (recursive) return fs_->RemoveTree(parent.ino(), p.name());
  ASSIGN_OR_RETURN(Attr a, fs_->Lookup(parent.ino(), p.name()));
  if (IsDir(a)) return fs_->Rmdir(parent.ino(), p.name());
  if (p.trailing_slash) return PosixError(ENOTDIR, StrCat("not a directory: ", p.path));
  return fs_->Unlink(parent.ino(), p.name()).status();
}

absl::StatusOr<Attr> FileOps::Rename(const CleanPath& from, const CleanPath& to) {
  if (from.is_root() || to.is_root()) return RootError("rename");
  ASSIGN_OR_RETURN(Attr src, ResolveDir(from.dir()));
  ASSIGN_OR_RETURN(Attr dst, ResolveDir(to.dir()));
  ASSIGN_OR_RETURN(RenameResult r, fs_->Rename(src.ino(), from.name(), dst.ino(), to.name(), 0));
  return r.moved;
}

absl::StatusOr<Attr> FileOps::Chmod(const CleanPath& p, uint32_t mode) {
  ASSIGN_OR_RETURN(Attr a, fs_->ResolvePath(p.path));
  SetAttrRequest req;
  req.set_ino(a.ino());
  req.set_valid(SET_ATTR_MODE);
  req.set_mode(mode & 07777);
  return fs_->SetAttr(req);
}

absl::StatusOr<Attr> FileOps::Touch(const CleanPath& p) {
  auto a = fs_->ResolvePath(p.path);
  if (!a.ok() && ErrnoOf(a.status()) == ENOENT) return CreateFile(p, false);
  if (!a.ok()) return a.status();
  SetAttrRequest req;
  req.set_ino(a->ino());
  req.set_valid(SET_ATTR_ATIME_NOW | SET_ATTR_MTIME_NOW);
  return fs_->SetAttr(req);
}

absl::StatusOr<Attr> FileOps::Truncate(const CleanPath& p, uint64_t size) {
  ASSIGN_OR_RETURN(Attr a, fs_->ResolvePath(p.path));
  SetAttrRequest req;
  req.set_ino(a.ino());
  req.set_valid(SET_ATTR_SIZE);
  req.set_size(size);
  return fs_->SetAttr(req);
}

absl::StatusOr<Attr> FileOps::Symlink(const CleanPath& link, std::string_view target) {
  if (link.is_root()) return PosixError(EEXIST, "the root directory exists");
  ASSIGN_OR_RETURN(Attr parent, ResolveDir(link.dir()));
  return fs_->Symlink(parent.ino(), link.name(), target, uid_, gid_);
}

}  // namespace kelp::filer
