// Filesystem: directory handles and streamed listings.
#include <sys/stat.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "mount/core/filesystem.h"
#include "shared/mutex.h"
#include "shared/status.h"

namespace kelp::mount {

// An open directory. Listing is streamed from the filer in batches of kBatch entries, so a
// directory of any size costs constant memory; offsets are the filer's stable cookies + 2
// (1 and 2 are "." and ".."), so a listing resumes exactly where it stopped, also after
// seekdir/telldir.
struct Filesystem::DirHandle {
  static constexpr uint32_t kBatch = 512;
  uint64_t ino = 0;     // set before the handle is shared
  uint64_t parent = 0;  // set before the handle is shared
  // mu serialises the listing of this handle (the kernel already does) and is held across its
  // ReadDir RPCs. The mount's lock order: DirHandle::mu, then InodeTable::mu_, then
  // FileData::mu_, then the leaves (VolumeSet::mu_, WriteBudget::mu_, MetaCache::mu_,
  // DirListings::mu_, ...). Under mu ReadDir takes DirListings::mu_ (Listed), MetaCache::mu_
  // (Remember, PutEntry), and InodeTable::mu_ then FileData::mu_ (Overlay), one at a time;
  // nothing takes mu while holding another lock.
  Mutex mu;
  std::deque<filer::DirEntry> buf ABSL_GUARDED_BY(mu);
  uint64_t buf_after ABSL_GUARDED_BY(mu) = 0;  // buf holds the entries following this cookie
  bool buf_plus ABSL_GUARDED_BY(mu) = false;
  bool eof ABSL_GUARDED_BY(mu) = false;
  bool valid ABSL_GUARDED_BY(mu) = false;
  // A listing from the start, every page at one directory version, gathered for DirListings.
  bool collecting ABSL_GUARDED_BY(mu) = false;
  uint64_t collect_version ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::pair<std::string, uint64_t>> collected ABSL_GUARDED_BY(mu);
};

namespace {

// Larger listings are not gathered (DirListings would not keep them anyway).
constexpr size_t kMaxCollected = 100'000;

}  // namespace

absl::StatusOr<uint64_t> Filesystem::OpenDir(uint64_t ino) {
  ASSIGN_OR_RETURN(Attr a, GetAttr(ino));
  if (!S_ISDIR(a.mode())) return PosixError(ENOTDIR, "not a directory");
  auto d = std::make_shared<DirHandle>();
  d->ino = ino;
  d->parent = ino == root_ ? ino : a.parent();
  MutexLock lock(handles_mu_);
  uint64_t id = next_handle_++;
  dirs_.emplace(id, std::move(d));
  return id;
}

void Filesystem::ReleaseDir(uint64_t dh) {
  MutexLock lock(handles_mu_);
  dirs_.erase(dh);
}

absl::Status Filesystem::ReadDir(uint64_t dh, uint64_t offset, bool plus,
                                 const std::function<bool(const DirItem&)>& fn) {
  std::shared_ptr<DirHandle> d;
  {
    MutexLock lock(handles_mu_);
    auto it = dirs_.find(dh);
    if (it == dirs_.end()) return PosixError(EBADF, "no such directory handle");
    d = it->second;
  }
  MutexLock lock(d->mu);
  if (offset == 0) {
    DirItem dot{".", d->ino, S_IFDIR, 1, nullptr};
    if (!fn(dot)) return absl::OkStatus();
    offset = 1;
  }
  if (offset == 1) {
    DirItem dotdot{"..", d->parent, S_IFDIR, 2, nullptr};
    if (!fn(dotdot)) return absl::OkStatus();
    offset = 2;
  }
  uint64_t cookie = offset - 2;
  if (!d->valid || d->buf_after != cookie || d->buf_plus != plus) {
    d->buf.clear();
    d->buf_after = cookie;
    d->buf_plus = plus;
    d->eof = false;
    d->valid = true;
    d->collecting = track_listings_ && cookie == 0;
    d->collect_version = 0;
    d->collected.clear();
  }
  while (true) {
    if (d->buf.empty()) {
      if (d->eof) return absl::OkStatus();
      removes_.WaitDir(d->ino);  // a listing without the names unlinked here
      auto page = meta_->ReadDirPage(d->ino, d->buf_after, DirHandle::kBatch, plus);
      if (!page.ok()) {
        d->valid = false;
        return page.status();
      }
      if (d->collecting) {
        if (page->dir_version() == 0 || (d->collect_version != 0 && page->dir_version() != d->collect_version) ||
            d->collected.size() + page->entries_size() > kMaxCollected) {
          d->collecting = false;
          d->collected.clear();
        } else {
          d->collect_version = page->dir_version();
          for (const auto& e : page->entries()) d->collected.emplace_back(e.name(), e.ino());
        }
      }
      for (auto& e : *page->mutable_entries()) d->buf.push_back(std::move(e));
      d->eof = page->eof();
      if (d->eof && d->collecting) {
        listings_.Listed(d->ino, d->collect_version, std::move(d->collected));
        d->collecting = false;
        d->collected.clear();
      }
      if (d->buf.empty()) return absl::OkStatus();
    }
    filer::DirEntry& e = d->buf.front();
    if (plus && e.has_attr()) {
      Remember(e.attr());
      cache_.PutEntry(d->ino, e.name(), e.ino());
    }
    Attr overlaid;
    if (plus && e.has_attr()) overlaid = Overlay(e.attr());
    DirItem item{e.name(), e.ino(), e.type(), e.cookie() + 2, plus && e.has_attr() ? &overlaid : nullptr};
    if (!fn(item)) return absl::OkStatus();
    d->buf_after = e.cookie();
    d->buf.pop_front();
  }
}

absl::Status Filesystem::FsyncDir(uint64_t ino) {
  removes_.WaitDir(ino);  // the unlinks behind in it are part of what becomes durable
  return meta_->Fsync(ino);
}

}  // namespace kelp::mount
