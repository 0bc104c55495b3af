// FileData's write and commit path: writes into the dirty buffer, uploads of full slots in
// the background, and Flush (close, fsync): the rest uploaded (or inlined, or journaled), then
// everything committed in order, with the attribute changes made here.
#include <algorithm>
#include <cstring>
#include <utility>

#include "filer/client/limits.h"
#include "mount/core/blob_packer.h"
#include "mount/core/file_data.h"
#include "shared/file_id.h"
#include "shared/log.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::Status FileData::Write(uint64_t offset, std::string_view data) {
  if (data.empty()) return absl::OkStatus();
  {
    MutexLock lock(mu_);
    if (!error_.ok()) return error_;
  }
  ctx_->budget->Acquire(data.size());
  std::shared_ptr<Upload> up;
  uint64_t grew;
  {
    MutexLock lock(mu_);
    grew = dirty_.Write(offset, data);
    size_ = std::max<uint64_t>(size_, offset + data.size());
    mtime_ns_ = NowNs();
    // A write after an explicit mtime sets the time again.
    pending_attrs_.set_valid(pending_attrs_.valid() & ~(filer::SET_ATTR_MTIME | filer::SET_ATTR_CTIME));
    std::vector<Extent> full = dirty_.TakeFullSlotsAt(offset);
    if (!full.empty()) up = NewUploadLocked(std::move(full));
  }
  if (grew < data.size()) ctx_->budget->Release(data.size() - grew);
  if (up) SubmitUpload(up);
  return absl::OkStatus();
}

void FileData::UploadDirty() {
  std::vector<std::shared_ptr<Upload>> ups;
  {
    MutexLock lock(mu_);
    ups = TakeDirtyUploadsLocked();
  }
  for (const auto& up : ups) SubmitUpload(up);
}

std::vector<std::shared_ptr<FileData::Upload>> FileData::TakeDirtyUploadsLocked() {
  // One upload of all of a random writer's dirty bytes (256 MiB of 4 KiB extents) was 64 blobs
  // stored one after the other by one thread, and every writer waited for the budget until the
  // last: seconds.
  std::vector<std::shared_ptr<Upload>> ups;
  std::vector<Extent> group;
  uint64_t bytes = 0;
  for (Extent& e : dirty_.TakeAll()) {
    bytes += e.data.size();
    group.push_back(std::move(e));
    if (bytes >= ctx_->chunk_size) {
      ups.push_back(NewUploadLocked(std::move(group)));
      group.clear();
      bytes = 0;
    }
  }
  if (!group.empty()) ups.push_back(NewUploadLocked(std::move(group)));
  return ups;
}

std::shared_ptr<FileData::Upload> FileData::NewUploadLocked(std::vector<Extent> extents) {
  auto up = std::make_shared<Upload>();
  up->seq = next_seq_++;
  for (const auto& e : extents) up->bytes += e.data.size();
  up->extents = std::move(extents);
  inflight_.emplace(up->seq, up);
  return up;
}

void FileData::SubmitUpload(const std::shared_ptr<Upload>& up) {
  auto self = shared_from_this();
  if (!ctx_->uploads->Submit([self, up] { self->RunUpload(up, false); })) RunUpload(up, false);
}

void FileData::RunUpload(const std::shared_ptr<Upload>& up, bool durable) {
  std::vector<filer::Chunk> chunks;
  std::set<uint32_t> lazy_volumes;
  absl::Status s;
  try {
    for (PackedBlob& b : PackExtents(up->extents, ctx_->chunk_size)) {
      auto fid = ctx_->blobs->Put(b.data, durable);
      if (!fid.ok()) {
        s = fid.status();
        break;
      }
      if (!durable) {
        if (auto id = FileId::Parse(*fid); id.ok()) lazy_volumes.insert(id->volume_id);
      }
      ctx_->fetcher->OnUploaded(*fid, b.data);
      for (auto& c : b.chunks) {
        c.set_fid(*fid);
        chunks.push_back(std::move(c));
      }
    }
  } catch (const std::exception& e) {
    s = PosixError(EIO, kelp::StrCat("upload: ", e.what()));
  }
  bool commit;
  {
    MutexLock lock(mu_);
    inflight_.erase(up->seq);
    // Even after a failure: blobs stored before it may end up committed by a retry.
    unsynced_.insert(lazy_volumes.begin(), lazy_volumes.end());
    if (s.ok()) {
      auto pos = std::upper_bound(pending_.begin(), pending_.end(), kPendingSeqBase + up->seq,
                                  [](uint64_t seq, const filer::Chunk& c) { return seq < c.seq(); });
      for (auto& c : chunks) c.set_seq(kPendingSeqBase + up->seq);
      pending_.insert(pos, std::make_move_iterator(chunks.begin()), std::make_move_iterator(chunks.end()));
    } else {
      spdlog::error("inode {}: upload of {} bytes failed: {}", ino_, up->bytes, s);
      if (error_.ok()) error_ = s;
    }
    // A failed upload's bytes go back under what was written since (up to the size: a
    // truncate may have come in between), so no fsync that did not see this error can
    // return without them stored: they are dirty again, and the next flush uploads them
    // (another handle's fsync that waited behind this one included).
    uint64_t kept = 0;
    if (!s.ok()) {
      for (const Extent& e : up->extents) {
        if (e.offset >= size_) continue;
        kept += dirty_.WriteUnder(e.offset, std::string_view(e.data).substr(0, size_ - e.offset));
      }
    }
    resolved_.reset();
    // With inflight_: a flush that sees the upload done sees its bytes given back (the
    // budget's lock is a leaf). Bytes kept dirty stay counted.
    ctx_->budget->Release(up->bytes - std::min(kept, up->bytes));
    commit = s.ok() && pending_.size() >= kBackgroundCommitChunks && !flushing_;
  }
  cv_.NotifyAll();
  // Out of inflight_ (under mu_), so no read looks at these bytes any more; a failed upload's
  // went back into dirty_ as copies.
  for (Extent& e : up->extents) ctx_->slot_buffers.Give(std::move(e.data));
  if (commit) {
    auto self = shared_from_this();
    ctx_->uploads->TrySubmit([self] { self->CommitInBackground(); });
  }
}

void FileData::JournalUpload(const std::shared_ptr<Upload>& up) {
  MutexLock lock(mu_);
  inflight_.erase(up->seq);
  uint64_t seq = kPendingSeqBase + up->seq;
  auto pos = std::upper_bound(pending_.begin(), pending_.end(), seq,
                              [](uint64_t s, const filer::Chunk& c) { return s < c.seq(); });
  std::vector<filer::Chunk> chunks;
  std::string bytes;
  for (auto& e : up->extents) {
    filer::Chunk& c = chunks.emplace_back();  // no fid: the commit carries the bytes
    c.set_offset(e.offset);
    c.set_size(e.data.size());
    c.set_blob_offset(bytes.size());
    c.set_seq(seq);
    bytes.append(e.data);
  }
  // One local seq for all the extents of the upload: they share one buffer, each chunk a slice.
  for (auto& c : chunks) c.set_blob_size(bytes.size());
  pending_.insert(pos, std::make_move_iterator(chunks.begin()), std::make_move_iterator(chunks.end()));
  HoldJournalLocked(seq, std::make_shared<const std::string>(std::move(bytes)));
  resolved_.reset();
  ctx_->budget->Release(up->bytes);
}

void FileData::CommitInBackground() {
  // Uploads that finish while a commit is out do not start one of their own (flushing_): the
  // loop commits what they left pending, as long as the committable prefix grows.
  uint64_t committed = 0;
  for (;;) {
    uint64_t barrier;
    {
      MutexLock lock(mu_);
      if (flushing_ || pending_.size() < kBackgroundCommitChunks) return;
      // Only the prefix no earlier upload is still working on.
      barrier = inflight_.empty() ? next_seq_ - 1 : inflight_.begin()->first - 1;
      if (barrier <= committed) return;  // that upload's completion starts the next one
      flushing_ = true;
    }
    absl::Status s = Commit(barrier, false, nullptr);
    {
      MutexLock lock(mu_);
      flushing_ = false;
    }
    cv_.NotifyAll();
    if (!s.ok()) {
      spdlog::warn("inode {}: background commit: {}", ino_, s);  // the next flush retries
      return;
    }
    committed = barrier;
  }
}

uint64_t FileData::JournaledDirtyLocked() const {
  if (dirty_.empty() || !inflight_.empty() || !unsynced_.empty() || !error_.ok()) return 0;
  uint64_t bytes = dirty_.bytes();
  if (!InlineEligibleLocked() && bytes > std::min<uint64_t>(ctx_->journal_max, filer::kMaxJournalCommit)) return 0;
  return bytes;
}

uint64_t FileData::ClaimSyncAhead(uint64_t max) {
  MutexLock lock(mu_);
  if (sync_ahead_queued_ || flushing_) return 0;
  uint64_t bytes = JournaledDirtyLocked();
  if (bytes == 0 || bytes > max) return 0;
  sync_ahead_queued_ = true;
  return bytes;
}

absl::StatusOr<bool> FileData::SyncAhead() {
  {
    MutexLock lock(mu_);
    sync_ahead_queued_ = false;
    if (dirty_.empty()) return false;  // the program's own fsync (or a close) came first
  }
  return FlushImpl(true, true);
}

void FileData::CancelSyncAhead() {
  MutexLock lock(mu_);
  sync_ahead_queued_ = false;
}

bool FileData::InlineEligibleLocked() const {
  return ctx_->max_inline > 0 && size_ <= ctx_->max_inline && loaded_ && committed_.empty() && pending_.empty() &&
         inflight_.empty() && error_.ok();
}

absl::Status FileData::Flush(bool sync) { return FlushImpl(sync, false).status(); }

absl::StatusOr<bool> FileData::FlushImpl(bool sync, bool ahead) {
  {
    MutexLock lock(mu_);
    while (flushing_) cv_.Wait(lock);
    flushing_ = true;
  }
  // Small files are written inline; that needs the current (inline) content.
  bool small;
  {
    MutexLock lock(mu_);
    small = ctx_->max_inline > 0 && size_ <= ctx_->max_inline && !dirty_.empty();
  }
  if (small) EnsureLoaded().IgnoreError();  // on failure: not inline
  enum class Way { kNothing, kInline, kJournal, kUpload } way = Way::kNothing;
  std::shared_ptr<Upload> up;
  std::vector<std::shared_ptr<Upload>> more;  // kUpload of more than a chunk: the others
  // An fsync's last upload is durable by itself (?fsync=true) when no other upload of this file
  // awaits a sync: one round trip instead of two for the common write-then-fsync.
  bool durable_upload = false;
  filer::SetAttrRequest attrs;  // attribute changes made here, sent with the data
  uint64_t barrier;
  {
    MutexLock lock(mu_);
    // A commit ahead goes only when this fsync would journal (or write inline), decided under
    // the same lock as the taking of the bytes: writes since the claim may have made it an upload.
    if (ahead && JournaledDirtyLocked() == 0) {
      flushing_ = false;
      cv_.NotifyAll();
      return false;
    }
    if (!dirty_.empty()) {
      uint64_t bytes = dirty_.bytes();
      if (InlineEligibleLocked()) {
        way = Way::kInline;
      } else if (sync && bytes <= std::min<uint64_t>(ctx_->journal_max, filer::kMaxJournalCommit)) {
        way = Way::kJournal;
      } else {
        way = Way::kUpload;
        durable_upload = sync && unsynced_.empty() && inflight_.empty();
      }
      if (way == Way::kUpload) {
        // More than a chunk goes out side by side; this thread stores the last one.
        more = TakeDirtyUploadsLocked();
        up = std::move(more.back());
        more.pop_back();
        if (!more.empty()) durable_upload = false;
      } else {
        up = NewUploadLocked(dirty_.TakeAll());
      }
    }
    barrier = next_seq_ - 1;
    attrs = std::exchange(pending_attrs_, {});
    attrs.set_ino(ino_);
  }
  if (way == Way::kInline) {
    absl::Status r = WriteInline(up, sync, &attrs);
    if (!r.ok()) {
      // Keep the data: it goes to a volume server instead.
      spdlog::warn("inode {}: inline write failed ({}); uploading instead", ino_, r);
      way = Way::kUpload;
    }
  }
  if (way == Way::kJournal) JournalUpload(up);
  for (const auto& other : more) SubmitUpload(other);
  if (way == Way::kUpload) RunUpload(up, durable_upload);
  absl::Status result;
  {
    MutexLock lock(mu_);
    while (!inflight_.empty() && inflight_.begin()->first <= barrier) cv_.Wait(lock);
    // A commit ahead leaves an upload's error to the program's own flush to report.
    if (!ahead) {
      result = error_;
      error_ = absl::OkStatus();
    }
  }
  // Data before the metadata that points at it: a synced WAL never names a volatile blob.
  if (sync) {
    absl::Status d = SyncUploads();
    if (result.ok()) result = d;
  }
  absl::Status c = Commit(barrier, sync, &attrs);
  if (result.ok()) result = c;
  RestoreAttrs(attrs);  // what did not reach the filer goes with the next flush
  {
    MutexLock lock(mu_);
    flushing_ = false;
  }
  cv_.NotifyAll();
  RETURN_IF_ERROR(result);
  return true;
}

absl::Status FileData::SyncUploads() {
  std::set<uint32_t> vids;
  {
    MutexLock lock(mu_);
    vids.swap(unsynced_);
  }
  std::set<uint32_t> closed = ctx_->closed_unsynced.Take();
  vids.insert(closed.begin(), closed.end());
  if (vids.empty()) return absl::OkStatus();
  absl::Status s = ctx_->blobs->SyncVolumes(std::vector<uint32_t>(vids.begin(), vids.end()));
  if (s.ok()) return s;
  spdlog::error("inode {}: fsync of volumes failed: {}", ino_, s);
  {
    MutexLock lock(mu_);
    unsynced_.insert(vids.begin(), vids.end());  // the next fsync tries again
  }
  return PosixError(EIO, kelp::StrCat("fsync: ", s.message()));
}

absl::Status FileData::Commit(uint64_t barrier, bool sync, filer::SetAttrRequest* attrs) {
  filer::CommitChunksRequest req;
  size_t count = 0;
  const bool with_attrs = attrs != nullptr && attrs->valid() != 0;
  {
    MutexLock lock(mu_);
    uint64_t min_size = 0;
    for (const auto& c : pending_) {
      if (c.seq() - kPendingSeqBase > barrier) break;
      filer::Chunk* out = req.add_chunks();
      *out = c;
      out->set_seq(0);
      if (c.fid().empty()) {  // journaled: its slice of the held bytes travels with it
        const std::string& held = *journal_.at(c.seq());
        out->set_data(held.substr(c.blob_offset(), c.size()));
        out->set_blob_offset(0);
        out->set_blob_size(c.size());
      }
      min_size = std::max<uint64_t>(min_size, c.offset() + c.size());
      ++count;
    }
    if (count > 0) {
      req.set_ino(ino_);
      req.set_min_size(std::min<uint64_t>(min_size, size_));
      req.set_mtime_ns(mtime_ns_);
      req.set_sync(sync);
      if (with_attrs) {
        // A local truncate: the data never reaches past the size, a commit only raises it.
        if (attrs->valid() & filer::SET_ATTR_SIZE) req.set_min_size(std::max(req.min_size(), attrs->size()));
        *req.mutable_attrs() = *attrs;
        req.mutable_attrs()->set_valid(attrs->valid() & ~filer::SET_ATTR_SIZE);
      }
      ++commits_in_flight_;
    }
  }
  if (count == 0) {
    if (with_attrs) {
      // No data to carry them: the changes go by themselves.
      auto a = ctx_->meta->SetAttr(*attrs);
      if (!a.ok()) return PosixError(ErrnoOf(a.status()), kelp::StrCat("setattr: ", a.status().message()));
      attrs->Clear();
      if (ctx_->on_attr) ctx_->on_attr(*a);
    }
    if (sync) return ctx_->meta->Fsync(ino_);
    return absl::OkStatus();
  }
  auto resp = ctx_->meta->CommitChunks(req);
  {
    MutexLock lock(mu_);
    --commits_in_flight_;
  }
  if (!resp.ok()) {
    spdlog::error("inode {}: commit of {} chunks failed: {}", ino_, count, resp.status());
    int err = ErrnoOf(resp.status());
    // The data is uploaded (or held) and kept pending: a later flush commits it again.
    return PosixError(err == ENOSPC || err == EDQUOT ? err : EIO, kelp::StrCat("commit: ", resp.status().message()));
  }
  if (with_attrs) attrs->Clear();
  ctx_->fetcher->Forget(resp->freed());
  {
    MutexLock lock(mu_);
    uint64_t new_version = resp->attr().version();
    bool append = loaded_ && view_version_ == known_version_ && new_version == known_version_ + 1 &&
                  static_cast<size_t>(resp->seqs_size()) == count;
    std::set<uint64_t> journal_seqs;
    for (size_t i = 0; i < count; ++i) {
      filer::Chunk c = std::move(pending_[i]);
      if (c.fid().empty()) {
        journal_seqs.insert(c.seq());
        if (append) {
          // Its bytes under the filer's seq, as a slice of their own, or the whole buffer
          // when it is all of it (one write between two fsyncs): no copy, and no fresh memory
          // for the next commit's request to fault in.
          const std::shared_ptr<const std::string>& held = journal_.at(c.seq());
          HoldJournalLocked(resp->seqs(i), c.blob_offset() == 0 && c.size() == held->size()
                                               ? held
                                               : std::make_shared<const std::string>(
                                                     held->substr(c.blob_offset(), c.size())));
          c.set_blob_offset(0);
          c.set_blob_size(c.size());
        }
      }
      if (append) {
        c.set_seq(resp->seqs(i));
        committed_.push_back(std::move(c));
      }
    }
    for (uint64_t seq : journal_seqs) DropJournalLocked(seq);
    pending_.erase(pending_.begin(), pending_.begin() + count);
    if (append) {
      view_version_ = new_version;
    } else {
      ClearViewLocked();
    }
    known_version_ = std::max(known_version_, new_version);
    if (!HasLocalChangesLocked()) mtime_ns_ = 0;
    resolved_.reset();
  }
  // The mount's files hold too many journaled bytes: this one lets go of its view, journaled
  // bytes included, and loads it again when a read needs it (docs/mount.md, "Durability").
  if (ctx_->journal_held.load() > ctx_->journal_memory) {
    MutexLock lock(mu_);
    ClearViewLocked();
  }
  if (ctx_->on_attr) ctx_->on_attr(resp->attr());
  return absl::OkStatus();
}

absl::Status FileData::WriteInline(const std::shared_ptr<Upload>& up, bool sync, filer::SetAttrRequest* attrs) {
  filer::WriteInlineRequest req;
  {
    MutexLock lock(mu_);
    std::string content = inline_data_;
    content.resize(size_, '\0');
    for (const auto& e : up->extents) {
      if (e.offset >= content.size()) continue;
      uint64_t n = std::min<uint64_t>(e.data.size(), content.size() - e.offset);
      std::memcpy(content.data() + e.offset, e.data.data(), n);
    }
    req.set_ino(ino_);
    req.set_data(std::move(content));
    req.set_mtime_ns(mtime_ns_);
    req.set_sync(sync);
    if (attrs->valid() & ~filer::SET_ATTR_SIZE) {  // the content's length is the size
      *req.mutable_attrs() = *attrs;
      req.mutable_attrs()->set_valid(attrs->valid() & ~filer::SET_ATTR_SIZE);
    }
    ++commits_in_flight_;
  }
  auto attr = ctx_->meta->WriteInline(req);
  {
    MutexLock lock(mu_);
    --commits_in_flight_;
    if (!attr.ok()) return attr.status();
    inflight_.erase(up->seq);
    ClearViewLocked();
    inline_data_ = std::move(*req.mutable_data());
    loaded_ = true;
    view_version_ = attr->version();
    known_version_ = std::max<uint64_t>(known_version_, attr->version());
    if (!HasLocalChangesLocked()) mtime_ns_ = 0;
  }
  attrs->Clear();
  cv_.NotifyAll();
  ctx_->budget->Release(up->bytes);
  if (ctx_->on_attr) ctx_->on_attr(*attr);
  return absl::OkStatus();
}

}  // namespace kelp::mount
