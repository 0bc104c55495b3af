#include "mount/core/file_data.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "filer/client/limits.h"
#include "filer/client/set_attr.h"
#include "mount/core/blob_packer.h"
#include "shared/file_id.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

// Pending chunks sort above every committed one: the filer's seqs stay far below this.
constexpr uint64_t kPendingSeqBase = 1ull << 62;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Sorted, merged list of [start, end) ranges.
void AddRange(std::vector<std::pair<uint64_t, uint64_t>>& v, uint64_t s, uint64_t e) { v.emplace_back(s, e); }

std::vector<std::pair<uint64_t, uint64_t>> Merge(std::vector<std::pair<uint64_t, uint64_t>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (auto& r : v) {
    if (!out.empty() && r.first <= out.back().second) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

void VolumeSet::Add(const std::set<uint32_t>& vids) {
  if (vids.empty()) return;
  std::lock_guard lock(mu_);
  vids_.insert(vids.begin(), vids.end());
}

std::set<uint32_t> VolumeSet::Take() {
  std::lock_guard lock(mu_);
  return std::exchange(vids_, {});
}

FileData::~FileData() { HandOverUnsynced(); }

void FileData::HandOverUnsynced() {
  std::lock_guard lock(mu_);
  ctx_->closed_unsynced.Add(unsynced_);
  unsynced_.clear();
}

FileData::FileData(FileContext* ctx, const Attr& attr)
    : ctx_(ctx), ino_(attr.ino()), size_(attr.size()), known_version_(attr.version()), dirty_(ctx->chunk_size) {
  if (attr.size() == 0) {  // nothing to load: an empty file reads as empty whatever its records
    loaded_ = true;
    view_version_ = attr.version();
  }
}

bool FileData::HasLocalChangesLocked() const {
  return !dirty_.empty() || !inflight_.empty() || !pending_.empty() || pending_attrs_.valid() != 0;
}

void FileData::MarkCreatedHere() {
  std::lock_guard lock(mu_);
  created_here_ = true;
}

bool FileData::SetAttrLocally(const filer::SetAttrRequest& req) {
  constexpr uint32_t kLocal = filer::SET_ATTR_MODE | filer::SET_ATTR_UID | filer::SET_ATTR_GID |
                              filer::SET_ATTR_SIZE | filer::SET_ATTR_ATIME | filer::SET_ATTR_MTIME |
                              filer::SET_ATTR_ATIME_NOW | filer::SET_ATTR_MTIME_NOW | filer::SET_ATTR_CTIME;
  uint64_t freed = 0;
  {
    std::lock_guard lock(mu_);
    if (!created_here_ || (req.valid() & ~kLocal) != 0 || !error_.ok()) return false;
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
    if (v & (filer::SET_ATTR_ATIME | filer::SET_ATTR_ATIME_NOW)) {
      p.set_atime_ns(v & filer::SET_ATTR_ATIME_NOW ? now : req.atime_ns());
    }
    if (v & (filer::SET_ATTR_MTIME | filer::SET_ATTR_MTIME_NOW)) {
      p.set_mtime_ns(v & filer::SET_ATTR_MTIME_NOW ? now : req.mtime_ns());
    }
    p.set_ctime_ns(v & filer::SET_ATTR_CTIME ? req.ctime_ns() : now);
    if (v & filer::SET_ATTR_SIZE) p.set_size(req.size());
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
  std::lock_guard lock(mu_);
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

bool FileData::Revalidate(const Attr& attr) {
  std::lock_guard lock(mu_);
  if (attr.version() <= known_version_) return false;
  known_version_ = attr.version();
  loaded_ = false;
  committed_.clear();
  inline_data_.clear();
  resolved_.reset();
  ++load_generation_;
  if (!HasLocalChangesLocked()) {
    size_ = attr.size();
  } else {
    size_ = std::max<uint64_t>(size_, attr.size());
  }
  return true;
}

void FileData::MarkStale() {
  std::lock_guard lock(mu_);
  loaded_ = false;
  committed_.clear();
  inline_data_.clear();
  resolved_.reset();
  ++load_generation_;
}

void FileData::Preload(const filer::GetChunksResponse& content) {
  std::lock_guard lock(mu_);
  const Attr& a = content.attr();
  if (loaded_ || a.version() < known_version_) return;
  committed_.assign(content.chunks().begin(), content.chunks().end());
  inline_data_ = content.inline_data();
  view_version_ = known_version_ = a.version();
  if (!HasLocalChangesLocked()) size_ = a.size();
  loaded_ = true;
  resolved_.reset();
}

void FileData::NoteOwnAttrChange(const Attr& attr) {
  std::lock_guard lock(mu_);
  if (attr.version() == known_version_ + 1) {
    if (loaded_ && view_version_ == known_version_) view_version_ = attr.version();
    known_version_ = attr.version();
  }
}

void FileData::Truncated(const Attr& attr) {
  uint64_t freed;
  {
    std::lock_guard lock(mu_);
    freed = dirty_.Truncate(attr.size());
    size_ = attr.size();
    known_version_ = std::max<uint64_t>(known_version_, attr.version());
    committed_.clear();
    inline_data_.clear();
    resolved_.reset();
    ++load_generation_;
    loaded_ = attr.size() == 0;
    view_version_ = attr.version();
  }
  if (freed) ctx_->budget->Release(freed);
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
  auto note = [&](const std::string& fid) {
    if (durable) return;
    auto id = FileId::Parse(fid);
    if (id.ok()) lazy_volumes.insert(id->volume_id);
  };
  absl::Status s;
  try {
    std::vector<PackedBlob> blobs;
    if (up->extents.size() == 1 && up->extents[0].data.size() <= ctx_->chunk_size) {
      // One extent: upload its bytes as they are, no copy.
      const Extent& e = up->extents[0];
      auto fid = ctx_->blobs->Put(e.data, durable);
      if (fid.ok()) {
        note(*fid);
        filer::Chunk c;
        c.set_fid(*fid);
        c.set_offset(e.offset);
        c.set_size(e.data.size());
        c.set_blob_offset(0);
        c.set_blob_size(e.data.size());
        chunks.push_back(std::move(c));
        ctx_->fetcher->OnUploaded(*fid, e.data);
      } else {
        s = fid.status();
      }
    } else {
      blobs = PackExtents(up->extents, ctx_->chunk_size);
      for (auto& b : blobs) {
        auto fid = ctx_->blobs->Put(b.data, durable);
        if (!fid.ok()) {
          s = fid.status();
          break;
        }
        note(*fid);
        ctx_->fetcher->OnUploaded(*fid, b.data);
        for (auto& c : b.chunks) {
          c.set_fid(*fid);
          chunks.push_back(std::move(c));
        }
      }
    }
  } catch (const std::exception& e) {
    s = PosixError(EIO, kelp::StrCat("upload: ", e.what()));
  }
  {
    std::lock_guard lock(mu_);
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
    resolved_.reset();
    // With inflight_: a flush that sees the upload done sees its bytes given back (the
    // budget's lock is a leaf).
    ctx_->budget->Release(up->bytes);
  }
  cv_.notify_all();
  bool commit;
  {
    std::lock_guard lock(mu_);
    commit = s.ok() && pending_.size() >= kBackgroundCommitChunks && !flushing_;
  }
  if (commit) {
    auto self = shared_from_this();
    ctx_->uploads->TrySubmit([self] { self->CommitInBackground(); });
  }
}

void FileData::CommitInBackground() {
  uint64_t barrier;
  {
    std::lock_guard lock(mu_);
    if (flushing_ || pending_.size() < kBackgroundCommitChunks) return;
    flushing_ = true;
    // Only the prefix no earlier upload is still working on.
    barrier = inflight_.empty() ? next_seq_ - 1 : inflight_.begin()->first - 1;
  }
  absl::Status s = Commit(barrier, false, nullptr);
  if (!s.ok()) spdlog::warn("inode {}: background commit: {}", ino_, s);  // the next flush retries
  {
    std::lock_guard lock(mu_);
    flushing_ = false;
  }
  cv_.notify_all();
}

absl::Status FileData::Write(uint64_t offset, std::string_view data) {
  if (data.empty()) return absl::OkStatus();
  {
    std::lock_guard lock(mu_);
    if (!error_.ok()) return error_;
  }
  ctx_->budget->Acquire(data.size());
  std::shared_ptr<Upload> up;
  uint64_t grew;
  {
    std::lock_guard lock(mu_);
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
  std::shared_ptr<Upload> up;
  {
    std::lock_guard lock(mu_);
    if (dirty_.empty()) return;
    up = NewUploadLocked(dirty_.TakeAll());
  }
  SubmitUpload(up);
}

absl::Status FileData::EnsureLoaded() {
  for (int attempt = 0; attempt < 5; ++attempt) {
    uint64_t gen;
    {
      std::lock_guard lock(mu_);
      if (loaded_) return absl::OkStatus();
      gen = load_generation_;
    }
    auto resp = ctx_->meta->GetChunks(ino_);
    if (!resp.ok()) return resp.status();
    std::lock_guard lock(mu_);
    if (load_generation_ != gen || resp->attr().version() < known_version_) continue;  // raced a change
    committed_.assign(resp->chunks().begin(), resp->chunks().end());
    inline_data_ = resp->inline_data();
    view_version_ = resp->attr().version();
    known_version_ = view_version_;
    if (!HasLocalChangesLocked()) size_ = resp->attr().size();
    loaded_ = true;
    resolved_.reset();
    return absl::OkStatus();
  }
  return absl::UnavailableError("file content changed while loading it; try again");
}

std::shared_ptr<const FileData::Resolved> FileData::ResolvedLocked() {
  if (resolved_ && resolved_->file_size == size_) return resolved_;
  auto r = std::make_shared<Resolved>();
  r->file_size = size_;
  r->chunks.reserve(committed_.size() + pending_.size());
  r->chunks.insert(r->chunks.end(), committed_.begin(), committed_.end());
  r->chunks.insert(r->chunks.end(), pending_.begin(), pending_.end());
  r->inline_data = inline_data_;
  std::vector<const filer::Chunk*> ptrs;
  ptrs.reserve(r->chunks.size());
  for (const auto& c : r->chunks) ptrs.push_back(&c);
  r->intervals = filer::ResolveVisibleIntervals(ptrs, size_, r->inline_data.size());
  resolved_ = r;
  return r;
}

absl::StatusOr<size_t> FileData::Read(uint64_t offset, size_t len, char* dst, bool sequential) {
  std::shared_ptr<const Resolved> res;
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  uint64_t n = 0;
  for (int attempt = 0;; ++attempt) {
    RETURN_IF_ERROR(EnsureLoaded());
    std::lock_guard lock(mu_);
    if (!loaded_) {
      if (attempt < 5) continue;
      return absl::UnavailableError("file content keeps changing");
    }
    if (offset >= size_) return 0;
    n = std::min<uint64_t>(len, size_ - offset);
    res = ResolvedLocked();
    auto cover = [&](uint64_t s, uint64_t e) { AddRange(covered, s, e); };
    for (const auto& [seq, up] : inflight_) {
      for (const auto& e : up->extents) {
        uint64_t s = std::max(offset, e.offset), t = std::min(offset + n, e.end());
        if (s >= t) continue;
        std::memcpy(dst + (s - offset), e.data.data() + (s - e.offset), t - s);
        cover(s, t);
      }
    }
    dirty_.Overlay(offset, n, dst, cover);
    break;
  }
  covered = Merge(std::move(covered));
  // Fill the ranges no memory layer covered from the resolved chunks.
  size_t ci = 0;
  for (const filer::VisibleInterval& v : filer::ClipIntervals(res->intervals, offset, n)) {
    uint64_t pos = v.offset, end = v.end();
    while (pos < end) {
      while (ci < covered.size() && covered[ci].second <= pos) ++ci;
      uint64_t piece_end = end;
      if (ci < covered.size() && covered[ci].first <= pos) {
        pos = std::min(end, covered[ci].second);  // covered by memory: skip
        continue;
      }
      if (ci < covered.size()) piece_end = std::min(piece_end, covered[ci].first);
      char* out = dst + (pos - offset);
      uint64_t len_piece = piece_end - pos;
      switch (v.source) {
        case filer::VisibleInterval::Source::kHole:
          std::memset(out, 0, len_piece);
          break;
        case filer::VisibleInterval::Source::kInline:
          if (pos + len_piece > res->inline_data.size()) return PosixError(EIO, "inline data shorter than its interval");
          std::memcpy(out, res->inline_data.data() + pos, len_piece);
          break;
        case filer::VisibleInterval::Source::kChunk: {
          uint64_t boff = v.blob_offset + (pos - v.offset);
          absl::Status s = ctx_->fetcher->Read(v.chunk->fid(), v.chunk->blob_size(), boff, len_piece, out, sequential);
          if (!s.ok()) return PosixError(EIO, kelp::StrCat("read of inode ", ino_, ": ", s.message()));
          break;
        }
      }
      pos = piece_end;
    }
  }
  // A streaming reader: start fetching the chunks that follow (read-ahead across chunks; the
  // fetcher itself reads ahead only within a blob).
  if (sequential && ctx_->fetcher->window() > 0) {
    uint64_t ahead = ctx_->fetcher->window() * ctx_->fetcher->depth();
    uint64_t from = offset + n;
    if (from < res->file_size) {
      for (const filer::VisibleInterval& v : filer::ClipIntervals(res->intervals, from, std::min(ahead, res->file_size - from))) {
        if (v.source != filer::VisibleInterval::Source::kChunk || v.chunk->blob_size() == 0) continue;
        for (uint64_t b = v.blob_offset; b < v.blob_offset + v.size; b += ctx_->fetcher->window()) {
          ctx_->fetcher->PrefetchAt(v.chunk->fid(), v.chunk->blob_size(), b);
        }
      }
    }
  }
  // Bytes below size that no interval covers (size grew since the resolution) are zeros,
  // unless memory covered them; the resolution is recomputed whenever size_ changes, so this
  // only guards against a concurrent extension.
  uint64_t resolved_end = std::min<uint64_t>(offset + n, std::max<uint64_t>(offset, res->file_size));
  if (resolved_end < offset + n) {
    uint64_t pos = resolved_end;
    for (const auto& [s, e] : covered) {
      if (e <= pos) continue;
      if (s > pos) std::memset(dst + (pos - offset), 0, std::min(s, offset + n) - pos);
      pos = std::max(pos, e);
      if (pos >= offset + n) break;
    }
    if (pos < offset + n) std::memset(dst + (pos - offset), 0, offset + n - pos);
  }
  return static_cast<size_t>(n);
}

bool FileData::InlineEligibleLocked() const {
  return ctx_->max_inline > 0 && size_ <= ctx_->max_inline && loaded_ &&
         committed_.empty() && pending_.empty() && inflight_.empty() && error_.ok();
}

absl::Status FileData::WriteInline(const std::shared_ptr<Upload>& up, bool sync, filer::SetAttrRequest* attrs) {
  std::string content;
  int64_t mtime;
  {
    std::lock_guard lock(mu_);
    content = inline_data_;
    content.resize(size_, '\0');
    for (const auto& e : up->extents) {
      if (e.offset >= content.size()) continue;
      uint64_t n = std::min<uint64_t>(e.data.size(), content.size() - e.offset);
      std::memcpy(content.data() + e.offset, e.data.data(), n);
    }
    mtime = mtime_ns_;
  }
  {
    std::lock_guard lock(mu_);
    ++commits_in_flight_;
  }
  filer::WriteInlineRequest req;
  req.set_ino(ino_);
  req.set_data(std::move(content));
  req.set_mtime_ns(mtime);
  req.set_sync(sync);
  if (attrs->valid() & ~filer::SET_ATTR_SIZE) {  // the content's length is the size
    *req.mutable_attrs() = *attrs;
    req.mutable_attrs()->set_valid(attrs->valid() & ~filer::SET_ATTR_SIZE);
  }
  auto attr = ctx_->meta->WriteInline(req);
  {
    std::lock_guard lock(mu_);
    --commits_in_flight_;
    if (attr.ok()) known_version_ = std::max<uint64_t>(known_version_, attr->version());
  }
  if (!attr.ok()) return attr.status();
  attrs->Clear();
  {
    std::lock_guard lock(mu_);
    inflight_.erase(up->seq);
    inline_data_ = std::move(*req.mutable_data());
    committed_.clear();
    loaded_ = true;
    view_version_ = attr->version();
    known_version_ = std::max<uint64_t>(known_version_, attr->version());
    resolved_.reset();
    if (!HasLocalChangesLocked()) mtime_ns_ = 0;
  }
  cv_.notify_all();
  ctx_->budget->Release(up->bytes);
  if (ctx_->on_attr) ctx_->on_attr(*attr);
  return absl::OkStatus();
}

absl::Status FileData::Flush(bool sync) {
  std::shared_ptr<Upload> up;
  bool try_inline = false;
  uint64_t barrier;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !flushing_; });
    flushing_ = true;
  }
  // Small files are written inline; that needs the current (inline) content.
  bool small;
  {
    std::lock_guard lock(mu_);
    small = ctx_->max_inline > 0 && size_ <= ctx_->max_inline && !dirty_.empty();
  }
  if (small) EnsureLoaded().IgnoreError();  // on failure: not inline
  // An fsync's last upload is durable by itself (?fsync=true) when no other upload of this file
  // awaits a sync: one round trip instead of two for the common write-then-fsync.
  bool durable_upload = false;
  filer::SetAttrRequest attrs;  // attribute changes made here, sent with the data
  {
    std::lock_guard lock(mu_);
    if (!dirty_.empty()) {
      try_inline = InlineEligibleLocked();
      durable_upload = sync && unsynced_.empty() && inflight_.empty();
      up = NewUploadLocked(dirty_.TakeAll());
    }
    barrier = next_seq_ - 1;
    attrs = std::exchange(pending_attrs_, {});
    attrs.set_ino(ino_);
  }
  absl::Status result;
  bool done_inline = false;
  if (up && try_inline) {
    absl::Status r = WriteInline(up, sync, &attrs);
    if (!r.ok()) {
      // Keep the data: it goes to a volume server instead.
      spdlog::warn("inode {}: inline write failed ({}); uploading instead", ino_, r);
    } else {
      done_inline = true;
    }
  }
  if (up && !done_inline) RunUpload(up, durable_upload);
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return inflight_.empty() || inflight_.begin()->first > barrier; });
    result = error_;
    error_ = absl::OkStatus();
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
    std::lock_guard lock(mu_);
    flushing_ = false;
  }
  cv_.notify_all();
  return result;
}

absl::Status FileData::SyncUploads() {
  std::set<uint32_t> vids;
  {
    std::lock_guard lock(mu_);
    vids.swap(unsynced_);
  }
  std::set<uint32_t> closed = ctx_->closed_unsynced.Take();
  vids.insert(closed.begin(), closed.end());
  if (vids.empty()) return absl::OkStatus();
  absl::Status s = ctx_->blobs->SyncVolumes(std::vector<uint32_t>(vids.begin(), vids.end()));
  if (s.ok()) return s;
  spdlog::error("inode {}: fsync of volumes failed: {}", ino_, s);
  {
    std::lock_guard lock(mu_);
    unsynced_.insert(vids.begin(), vids.end());  // the next fsync tries again
  }
  return PosixError(EIO, kelp::StrCat("fsync: ", s.message()));
}

absl::Status FileData::Commit(uint64_t barrier, bool sync, filer::SetAttrRequest* attrs) {
  filer::CommitChunksRequest req;
  size_t count = 0;
  const bool with_attrs = attrs != nullptr && attrs->valid() != 0;
  {
    std::lock_guard lock(mu_);
    uint64_t min_size = 0;
    for (const auto& c : pending_) {
      if (c.seq() - kPendingSeqBase > barrier) break;
      filer::Chunk* out = req.add_chunks();
      *out = c;
      out->set_seq(0);
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
    std::lock_guard lock(mu_);
    --commits_in_flight_;
  }
  if (!resp.ok()) {
    spdlog::error("inode {}: commit of {} chunks failed: {}", ino_, count, resp.status());
    int err = ErrnoOf(resp.status());
    // The data is uploaded and kept pending: a later flush commits it again.
    return PosixError(err == ENOSPC || err == EDQUOT ? err : EIO, kelp::StrCat("commit: ", resp.status().message()));
  }
  if (with_attrs) attrs->Clear();
  {
    std::lock_guard lock(mu_);
    uint64_t new_version = resp->attr().version();
    bool append = loaded_ && view_version_ == known_version_ && new_version == known_version_ + 1 &&
                  static_cast<size_t>(resp->seqs_size()) == count;
    for (size_t i = 0; i < count; ++i) {
      if (append) {
        filer::Chunk c = pending_[i];
        c.set_seq(resp->seqs(i));
        committed_.push_back(std::move(c));
      }
    }
    pending_.erase(pending_.begin(), pending_.begin() + count);
    if (append) {
      view_version_ = new_version;
    } else {
      loaded_ = false;
      committed_.clear();
      inline_data_.clear();
      ++load_generation_;
    }
    known_version_ = std::max(known_version_, new_version);
    if (!HasLocalChangesLocked()) mtime_ns_ = 0;
    resolved_.reset();
  }
  if (ctx_->on_attr) ctx_->on_attr(resp->attr());
  return absl::OkStatus();
}

bool FileData::IsOwnVersion(uint64_t version) const {
  std::lock_guard lock(mu_);
  return version <= known_version_ || commits_in_flight_ > 0;
}

uint64_t FileData::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

uint64_t FileData::dirty_bytes() const {
  std::lock_guard lock(mu_);
  return dirty_.bytes();
}

bool FileData::HasLocalChanges() const {
  std::lock_guard lock(mu_);
  return HasLocalChangesLocked();
}

void FileData::OverlayAttr(Attr* a) const {
  std::lock_guard lock(mu_);
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

}  // namespace kelp::mount
