// Filesystem: open files (open, create, read, write, flush, fsync, release).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "filer/client/limits.h"
#include "mount/core/filesystem.h"
#include "shared/log.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

bool WantsWrite(int flags) { return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC); }

}  // namespace

absl::StatusOr<OpenResult> Filesystem::Open(uint64_t ino, int flags) {
  if (WantsWrite(flags)) RETURN_IF_ERROR(CheckWritable());
  // Close-to-open: every open asks the filer, so a file closed by another mount is seen fresh.
  // The first handle's Open counts it open at the filer and brings the content along.
  ASSIGN_OR_RETURN(filer::GetChunksResponse opened, session_.Open(ino, /*with_content=*/!(flags & O_TRUNC)));
  const Attr& attr = opened.attr();
  Remember(attr);
  if (S_ISDIR(attr.mode())) {
    session_.Release(ino);
    return PosixError(EISDIR, "is a directory");
  }
  bool first = false;
  std::shared_ptr<FileData> f = inodes_.OpenFile(&file_ctx_, attr, &first);
  bool changed = !first && f->Revalidate(attr);
  if (opened.chunks_size() > 0 || !opened.inline_data().empty() || attr.size() == 0) f->Preload(opened);
  bool same_version = inodes_.SetCachedVersion(ino, attr.version());
  auto h = std::make_shared<FileHandle>();
  h->ino = ino;
  h->file = f;
  h->flags = flags;
  OpenResult r;
  r.fh = AddHandle(std::move(h));
  r.keep_cache = same_version && !changed;
  r.attr = Overlay(attr);
  return r;
}

absl::StatusOr<OpenResult> Filesystem::Create(uint64_t parent, std::string_view name, uint32_t mode, int flags,
                                              const Caller& caller) {
  RETURN_IF_ERROR(CheckWritable());
  if (name.size() > filer::kMaxNameLen) return PosixError(ENAMETOOLONG, "name too long");
  removes_.WaitDir(parent);  // the name may be one of the unlinks behind
  filer::CreateRequest req;
  req.set_parent(parent);
  req.set_name(std::string(name));
  req.set_mode(S_IFREG | (mode & 07777 & ~opts_.umask));
  req.set_uid(caller.uid);
  req.set_gid(caller.gid);
  if (auto p = ParentModeGid(parent); p && (p->first & S_ISGID)) req.set_gid(p->second);
  req.set_exclusive((flags & O_EXCL) != 0);
  req.set_truncate((flags & O_TRUNC) != 0);
  req.set_session(session_.id());
  req.set_open_handle(true);
  Attr dir_after;
  auto created = meta_->Create(req, &dir_after);
  if (created.status().code() == absl::StatusCode::kNotFound && session_.Reattach().ok()) {
    created = meta_->Create(req, &dir_after);  // the filer had lost our session ("unknown session")
  }
  if (!created.ok()) {
    return created.status();
  }
  Attr attr = *created;
  // The filer counts the file as open by our session already.
  session_.OpenedByCreate(attr.ino());
  if (S_ISDIR(attr.mode())) {
    session_.Release(attr.ino());
    return PosixError(EISDIR, "is a directory");
  }
  cache_.PutEntry(parent, name, attr.ino());
  ListingAdded(parent, dir_after, name, attr.ino());
  DirChanged(parent, dir_after);
  bool first = false;
  std::shared_ptr<FileData> f = inodes_.OpenFile(&file_ctx_, attr, &first);
  // A new inode (version 1: nobody changed it since it was made).
  if (first && attr.version() == 1) f->MarkCreatedHere();
  if (!first) {
    if (req.truncate()) {
      f->Truncated(attr);
    } else {
      f->Revalidate(attr);
    }
  }
  Remember(attr);
  inodes_.SetCachedVersion(attr.ino(), attr.version());
  inodes_.AddLookup(attr.ino());
  auto h = std::make_shared<FileHandle>();
  h->ino = attr.ino();
  h->file = f;
  h->flags = flags;
  OpenResult r;
  r.fh = AddHandle(std::move(h));
  r.keep_cache = true;
  r.attr = Overlay(attr);
  return r;
}

absl::StatusOr<size_t> Filesystem::Read(uint64_t fh, uint64_t offset, size_t len, char* dst) {
  auto h = Handle(fh);
  if (!h) return PosixError(EBADF, "no such handle");
  bool sequential;
  {
    MutexLock lock(h->mu);
    sequential = h->pattern.OnRead(offset, len);
  }
  return h->file->Read(offset, len, dst, sequential);
}

absl::Status Filesystem::Write(uint64_t fh, uint64_t offset, std::string_view data) {
  RETURN_IF_ERROR(CheckWritable());
  auto h = Handle(fh);
  if (!h) return PosixError(EBADF, "no such handle");
  return h->file->Write(offset, data);
}

absl::Status Filesystem::Flush(uint64_t fh) {
  auto h = Handle(fh);
  if (!h) return PosixError(EBADF, "no such handle");
  return h->file->Flush(false);
}

absl::Status Filesystem::Fsync(uint64_t fh, bool datasync) {
  auto h = Handle(fh);
  if (!h) return PosixError(EBADF, "no such handle");
  (void)datasync;  // both make data and metadata durable: the size is metadata data needs
  const bool changes = opts_.sync_ahead > 0 && h->file->HasLocalChanges();
  fsyncs_running_.fetch_add(1);
  absl::Status s = h->file->Flush(true);
  // Only for an fsync that ran alone: concurrent fsyncs already share the filer's WAL syncs
  // (its write group), and commits ahead would only add work (sysbench with 16 threads: -10 %).
  if (s.ok() && changes && fsyncs_running_.load() == 1) SyncAhead(h->file.get());
  fsyncs_running_.fetch_sub(1);
  return s;
}

void Filesystem::SyncAhead(const FileData* synced) {
  // Oldest inode first: a program that fsyncs its files one after another usually goes in the
  // order it made them (sysbench, a database's checkpoint), so the next fsyncs find theirs done.
  std::vector<std::shared_ptr<FileData>> picked;
  uint64_t budget = opts_.sync_ahead;
  auto files = inodes_.OpenFiles();
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a->ino() < b->ino(); });
  for (auto& f : files) {
    if (f.get() == synced) continue;
    uint64_t n = f->ClaimSyncAhead(budget);
    if (n == 0) continue;
    budget -= n;
    picked.push_back(std::move(f));
  }
  for (auto& f : picked) {
    bool queued = sync_ahead_pool_->TrySubmit([f, counter = sync_ahead_files_] {
      absl::StatusOr<bool> done = f->SyncAhead();
      if (!done.ok()) spdlog::warn("inode {}: commit ahead of its fsync: {}", f->ino(), done.status());
      if (done.ok() && *done) counter->Inc();
    });
    if (!queued) f->CancelSyncAhead();  // a full queue (or a stopping mount): its own fsync commits it
  }
}

absl::Status Filesystem::Release(uint64_t fh) {
  std::shared_ptr<FileHandle> h;
  {
    MutexLock lock(handles_mu_);
    auto it = handles_.find(fh);
    if (it == handles_.end()) return PosixError(EBADF, "no such handle");
    h = std::move(it->second);
    handles_.erase(it);
  }
  // Writes through a shared mapping can arrive after the last flush.
  absl::Status s = h->file->HasLocalChanges() ? h->file->Flush(false) : absl::OkStatus();
  if (!s.ok()) spdlog::error("release of inode {}: {}", h->ino, s);
  inodes_.CloseFile(h->ino);
  // The session counts handles (Open, Create) and tells the filer when the last one goes.
  session_.Release(h->ino);
  return s;
}

}  // namespace kelp::mount
