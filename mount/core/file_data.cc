// FileData: the filer's view of the file, attributes, and the bookkeeping both paths share.
// Reads are in file_read.cc, writes and commits in file_write.cc.
#include "mount/core/file_data.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "filer/client/limits.h"
#include "filer/client/set_attr.h"
#include "shared/log.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void VolumeSet::Add(const std::set<uint32_t>& vids) {
  if (vids.empty()) return;
  MutexLock lock(mu_);
  if (vids_.empty()) added_.NotifyAll();
  vids_.insert(vids.begin(), vids.end());
}

void VolumeSet::StartWriteback(BlobStore* blobs, std::chrono::milliseconds interval) {
  writeback_ = std::thread([this, blobs, interval] { WritebackLoop(blobs, interval); });
}

void VolumeSet::StopWriteback() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  added_.NotifyAll();
  if (writeback_.joinable()) writeback_.join();
}

void VolumeSet::WritebackLoop(BlobStore* blobs, std::chrono::milliseconds interval) {
  int failures = 0;  // in a row: a server down for long is named once a minute, not every round
  MutexLock lock(mu_);
  for (;;) {
    while (!stopping_ && vids_.empty()) added_.Wait(lock);
    // Gather what the next interval brings (a copy of many files closes many), then sync all.
    auto due = std::chrono::steady_clock::now() + interval;
    while (!stopping_ && added_.WaitUntil(lock, due)) {
    }
    bool last = stopping_;
    std::set<uint32_t> vids = std::exchange(vids_, {});
    if (!vids.empty()) {
      lock.Unlock();
      absl::Status s = blobs->SyncVolumes(std::vector<uint32_t>(vids.begin(), vids.end()));
      if (s.ok() && failures > 0) spdlog::info("writeback: volumes of closed files synced again");
      if (!s.ok() && failures % 60 == 0) {
        spdlog::warn("writeback: sync of {} volumes of closed files failed (retried every {} ms): {}", vids.size(),
                     interval.count(), s);
      }
      failures = s.ok() ? 0 : failures + 1;
      lock.Lock();
      if (!s.ok()) vids_.insert(vids.begin(), vids.end());  // the next round, or an fsync, tries again
    }
    if (last) return;
  }
}

std::set<uint32_t> VolumeSet::Take() {
  MutexLock lock(mu_);
  return std::exchange(vids_, {});
}

FileData::FileData(FileContext* ctx, const Attr& attr)
    : ctx_(ctx),
      ino_(attr.ino()),
      size_(attr.size()),
      known_version_(attr.version()),
      dirty_(ctx->chunk_size, &ctx->slot_buffers) {
  if (attr.size() == 0) {  // nothing to load: an empty file reads as empty whatever its records
    loaded_ = true;
    view_version_ = attr.version();
  }
}

FileData::~FileData() {
  HandOverUnsynced();
  MutexLock lock(mu_);
  ctx_->journal_held -= journal_bytes_;
}

void FileData::HandOverUnsynced() {
  MutexLock lock(mu_);
  ctx_->closed_unsynced.Add(unsynced_);
  unsynced_.clear();
}

bool FileData::HasLocalChangesLocked() const {
  return !dirty_.empty() || !inflight_.empty() || !pending_.empty() || pending_attrs_.valid() != 0;
}

// ---- The committed view ----

void FileData::HoldJournalLocked(uint64_t seq, std::shared_ptr<const std::string> data) {
  DropJournalLocked(seq);
  journal_bytes_ += data->size();
  ctx_->journal_held += data->size();
  journal_[seq] = std::move(data);
}

void FileData::DropJournalLocked(uint64_t seq) {
  auto it = journal_.find(seq);
  if (it == journal_.end()) return;
  journal_bytes_ -= it->second->size();
  ctx_->journal_held -= it->second->size();
  journal_.erase(it);
}

void FileData::ClearViewLocked() {
  loaded_ = false;
  committed_.clear();
  inline_data_.clear();
  // Pending journaled bytes stay: they are this mount's, not yet on the filer.
  while (!journal_.empty() && journal_.begin()->first < kPendingSeqBase) DropJournalLocked(journal_.begin()->first);
  resolved_.reset();
  ++load_generation_;
}

void FileData::LoadViewLocked(const filer::GetChunksResponse& content) {
  ClearViewLocked();
  committed_.reserve(content.chunks_size());
  for (const filer::Chunk& c : content.chunks()) {
    committed_.push_back(c);
    if (!c.data().empty()) {
      HoldJournalLocked(c.seq(), std::make_shared<const std::string>(c.data()));
      committed_.back().clear_data();
    }
  }
  inline_data_ = content.inline_data();
  view_version_ = known_version_ = content.attr().version();
  if (!HasLocalChangesLocked()) size_ = content.attr().size();
  loaded_ = true;
}

bool FileData::Revalidate(const Attr& attr) {
  MutexLock lock(mu_);
  if (attr.version() <= known_version_) return false;
  known_version_ = attr.version();
  ClearViewLocked();
  if (!HasLocalChangesLocked()) {
    size_ = attr.size();
  } else {
    size_ = std::max<uint64_t>(size_, attr.size());
  }
  return true;
}

void FileData::MarkStale() {
  MutexLock lock(mu_);
  ClearViewLocked();
}

void FileData::Preload(const filer::GetChunksResponse& content) {
  MutexLock lock(mu_);
  if (loaded_ || content.attr().version() < known_version_) return;
  LoadViewLocked(content);
}

void FileData::NoteOwnAttrChange(const Attr& attr) {
  MutexLock lock(mu_);
  if (attr.version() == known_version_ + 1) {
    if (loaded_ && view_version_ == known_version_) view_version_ = attr.version();
    known_version_ = attr.version();
  }
}

void FileData::Truncated(const Attr& attr) {
  uint64_t freed;
  {
    MutexLock lock(mu_);
    freed = dirty_.Truncate(attr.size());
    size_ = attr.size();
    known_version_ = std::max<uint64_t>(known_version_, attr.version());
    ClearViewLocked();
    loaded_ = attr.size() == 0;
    view_version_ = attr.version();
  }
  if (freed) ctx_->budget->Release(freed);
}

// ---- Attributes ----

void FileData::MarkCreatedHere() {
  MutexLock lock(mu_);
  created_here_ = true;
}

bool FileData::SetAttrLocally(const filer::SetAttrRequest& req) {
  constexpr uint32_t kLocal = filer::SET_ATTR_MODE | filer::SET_ATTR_UID | filer::SET_ATTR_GID |
                              filer::SET_ATTR_SIZE | filer::SET_ATTR_ATIME | filer::SET_ATTR_MTIME |
                              filer::SET_ATTR_ATIME_NOW | filer::SET_ATTR_MTIME_NOW | filer::SET_ATTR_CTIME;
  uint64_t freed = 0;
  {
    MutexLock lock(mu_);
    constexpr uint32_t kTimes = filer::SET_ATTR_ATIME | filer::SET_ATTR_MTIME | filer::SET_ATTR_ATIME_NOW |
                                filer::SET_ATTR_MTIME_NOW | filer::SET_ATTR_CTIME;
    const bool times_of_dirty = (req.valid() & ~kTimes) == 0 && HasLocalChangesLocked();
    if (!(created_here_ || times_of_dirty) || (req.valid() & ~kLocal) != 0 || !error_.ok()) return false;
    const int64_t now = NowNs();
    if (req.valid() & filer::SET_ATTR_SIZE) {
      // Only while every byte of the file is still in the dirty buffer.
      if (!committed_.empty() || !inline_data_.empty() || !pending_.empty() || !inflight_.empty() ||
          req.size() > filer::kMaxFileSize) {
        return false;
      }
      freed = dirty_.Truncate(req.size());
      size_ = req.size();
      mtime_ns_ = now;
      resolved_.reset();
    }
    // Made concrete now, so OverlayAttr shows what the commit will set.
    filer::SetAttrRequest& p = pending_attrs_;
    const uint32_t v = req.valid();
    if (v & filer::SET_ATTR_MODE) p.set_mode(req.mode());
    if (v & filer::SET_ATTR_UID) p.set_uid(req.uid());
    if (v & filer::SET_ATTR_GID) p.set_gid(req.gid());
    if (v & filer::SET_ATTR_SIZE) p.set_size(req.size());
    if (v & (filer::SET_ATTR_ATIME | filer::SET_ATTR_ATIME_NOW)) {
      p.set_atime_ns(v & filer::SET_ATTR_ATIME_NOW ? now : req.atime_ns());
    }
    if (v & (filer::SET_ATTR_MTIME | filer::SET_ATTR_MTIME_NOW)) {
      p.set_mtime_ns(v & filer::SET_ATTR_MTIME_NOW ? now : req.mtime_ns());
    }
    p.set_ctime_ns(v & filer::SET_ATTR_CTIME ? req.ctime_ns() : now);
    uint32_t bits = v & (filer::SET_ATTR_MODE | filer::SET_ATTR_UID | filer::SET_ATTR_GID | filer::SET_ATTR_SIZE);
    if (v & (filer::SET_ATTR_ATIME | filer::SET_ATTR_ATIME_NOW)) bits |= filer::SET_ATTR_ATIME;
    if (v & (filer::SET_ATTR_MTIME | filer::SET_ATTR_MTIME_NOW)) bits |= filer::SET_ATTR_MTIME;
    p.set_valid(p.valid() | bits | filer::SET_ATTR_CTIME);
  }
  if (freed) ctx_->budget->Release(freed);
  return true;
}

void FileData::RestoreAttrs(const filer::SetAttrRequest& attrs) {
  if (attrs.valid() == 0) return;
  MutexLock lock(mu_);
  filer::SetAttrRequest merged = attrs;
  const filer::SetAttrRequest& newer = pending_attrs_;  // fields set since win
  const uint32_t v = newer.valid();
  if (v & filer::SET_ATTR_MODE) merged.set_mode(newer.mode());
  if (v & filer::SET_ATTR_UID) merged.set_uid(newer.uid());
  if (v & filer::SET_ATTR_GID) merged.set_gid(newer.gid());
  if (v & filer::SET_ATTR_SIZE) merged.set_size(newer.size());
  if (v & filer::SET_ATTR_ATIME) merged.set_atime_ns(newer.atime_ns());
  if (v & filer::SET_ATTR_MTIME) merged.set_mtime_ns(newer.mtime_ns());
  if (v & filer::SET_ATTR_CTIME) merged.set_ctime_ns(newer.ctime_ns());
  merged.set_valid(attrs.valid() | v);
  pending_attrs_ = std::move(merged);
}

void FileData::OverlayAttr(Attr* a) const {
  MutexLock lock(mu_);
  if (a->version() > known_version_ && !HasLocalChangesLocked()) return;  // newer than what we know
  a->set_size(size_);
  if (mtime_ns_ != 0) {
    a->set_mtime_ns(std::max(a->mtime_ns(), mtime_ns_));
    a->set_ctime_ns(std::max(a->ctime_ns(), mtime_ns_));
  }
  if (pending_attrs_.valid() != 0) {
    int64_t ctime = a->ctime_ns();
    filer::ApplySetAttr(pending_attrs_, 0, a);  // concrete values: "now" is not used
    if (!(pending_attrs_.valid() & filer::SET_ATTR_CTIME)) a->set_ctime_ns(ctime);
  }
}

bool FileData::IsOwnVersion(uint64_t version) const {
  MutexLock lock(mu_);
  return version <= known_version_ || commits_in_flight_ > 0;
}

uint64_t FileData::size() const {
  MutexLock lock(mu_);
  return size_;
}

uint64_t FileData::dirty_bytes() const {
  MutexLock lock(mu_);
  return dirty_.bytes();
}

bool FileData::HasLocalChanges() const {
  MutexLock lock(mu_);
  return HasLocalChangesLocked();
}

}  // namespace kelp::mount
