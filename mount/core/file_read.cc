// FileData's read path: the committed view loaded and resolved, then Read in four steps:
// overlay the memory layers, fill the rest from the visible intervals, read ahead for a
// streaming reader, zero what no interval reaches.
#include <algorithm>
#include <cstring>

#include "mount/core/file_data.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {
namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;  // [start, end)

Ranges Merge(Ranges v) {
  std::sort(v.begin(), v.end());
  Ranges out;
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

absl::Status FileData::EnsureLoaded() {
  for (int attempt = 0; attempt < 5; ++attempt) {
    uint64_t gen;
    {
      MutexLock lock(mu_);
      if (loaded_) return absl::OkStatus();
      gen = load_generation_;
    }
    auto resp = ctx_->meta->GetChunks(ino_);
    if (!resp.ok()) return resp.status();
    {
      MutexLock lock(mu_);
      if (load_generation_ != gen || resp->attr().version() < known_version_) continue;  // raced a change
      LoadViewLocked(*resp);
    }
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
  for (const filer::VisibleInterval& v : r->intervals) {
    if (v.source != filer::VisibleInterval::Source::kChunk || !v.chunk->fid().empty()) continue;
    if (auto j = journal_.find(v.chunk->seq()); j != journal_.end()) r->journal.emplace_back(j->first, j->second);
  }
  std::sort(r->journal.begin(), r->journal.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  r->journal.erase(std::unique(r->journal.begin(), r->journal.end(),
                               [](const auto& a, const auto& b) { return a.first == b.first; }),
                   r->journal.end());
  PruneShadowedLocked(*r);
  resolved_ = r;
  return r;
}

void FileData::PruneShadowedLocked(const Resolved& r) {
  // Only with nothing pending: a committed chunk hidden by pending ones alone must stay while
  // those may still fail to commit.
  if (!pending_.empty() || committed_.empty()) return;
  std::vector<bool> visible(committed_.size(), false);
  for (const filer::VisibleInterval& v : r.intervals) {
    if (v.source != filer::VisibleInterval::Source::kChunk) continue;
    size_t i = static_cast<size_t>(v.chunk - r.chunks.data());
    if (i < visible.size()) visible[i] = true;
  }
  size_t out = 0;
  for (size_t i = 0; i < committed_.size(); ++i) {
    const filer::Chunk& c = committed_[i];
    // Newer chunks cover every byte of it below the size: no read ever reaches it again (a
    // chunk reaching past the size is kept, the size may grow back over it).
    if (!visible[i] && c.offset() + c.size() <= size_) {
      if (c.fid().empty()) DropJournalLocked(c.seq());
      continue;
    }
    if (out != i) committed_[out] = std::move(committed_[i]);
    ++out;
  }
  committed_.resize(out);
}

void FileData::OverlayMemoryLocked(uint64_t offset, uint64_t n, char* dst, Ranges* covered) {
  auto cover = [&](uint64_t s, uint64_t e) { covered->emplace_back(s, e); };
  for (const auto& [seq, up] : inflight_) {  // older first: dirty bytes, newer, go over them
    // Uploads finish in any order: a later one may be done (its chunks pending) while this
    // one still runs. Where such newer chunks lie, this upload's bytes are stale and the
    // intervals (which order pending chunks by seq) must answer.
    Ranges newer;
    auto first_newer = std::upper_bound(pending_.begin(), pending_.end(), kPendingSeqBase + seq,
                                        [](uint64_t v, const filer::Chunk& c) { return v < c.seq(); });
    for (auto c = first_newer; c != pending_.end(); ++c) newer.emplace_back(c->offset(), c->offset() + c->size());
    newer = Merge(std::move(newer));
    for (const auto& e : up->extents) {
      uint64_t s = std::max(offset, e.offset), t = std::min(offset + n, e.end());
      for (const auto& [ns, nt] : newer) {  // copy [s, t) but for the newer ranges, in order
        if (s >= t || nt <= s) continue;
        if (ns >= t) break;
        if (ns > s) {
          std::memcpy(dst + (s - offset), e.data.data() + (s - e.offset), ns - s);
          cover(s, ns);
        }
        s = std::max(s, nt);
      }
      if (s >= t) continue;
      std::memcpy(dst + (s - offset), e.data.data() + (s - e.offset), t - s);
      cover(s, t);
    }
  }
  dirty_.Overlay(offset, n, dst, cover);
}

absl::Status FileData::FillFromIntervals(const Resolved& res, uint64_t offset, uint64_t n, char* dst,
                                         const Ranges& covered, bool sequential) {
  size_t ci = 0;
  for (const filer::VisibleInterval& v : filer::ClipIntervals(res.intervals, offset, n)) {
    uint64_t pos = v.offset, end = v.end();
    while (pos < end) {
      while (ci < covered.size() && covered[ci].second <= pos) ++ci;
      if (ci < covered.size() && covered[ci].first <= pos) {
        pos = std::min(end, covered[ci].second);  // the memory layers have it
        continue;
      }
      uint64_t piece_end = ci < covered.size() ? std::min(end, covered[ci].first) : end;
      char* out = dst + (pos - offset);
      uint64_t len = piece_end - pos;
      switch (v.source) {
        case filer::VisibleInterval::Source::kHole:
          std::memset(out, 0, len);
          break;
        case filer::VisibleInterval::Source::kInline:
          if (pos + len > res.inline_data.size()) return PosixError(EIO, "inline data shorter than its interval");
          std::memcpy(out, res.inline_data.data() + pos, len);
          break;
        case filer::VisibleInterval::Source::kChunk: {
          uint64_t boff = v.blob_offset + (pos - v.offset);
          if (v.chunk->fid().empty()) {  // journaled: its bytes are held here, or reloaded
            auto j = std::lower_bound(res.journal.begin(), res.journal.end(), v.chunk->seq(),
                                      [](const auto& e, uint64_t seq) { return e.first < seq; });
            if (j != res.journal.end() && j->first == v.chunk->seq() && boff + len <= j->second->size()) {
              std::memcpy(out, j->second->data() + boff, len);
              break;
            }
            return absl::AbortedError("journaled bytes no longer held");  // Read reloads
          }
          absl::Status s = ctx_->fetcher->Read(v.chunk->fid(), v.chunk->blob_size(), boff, len, out, sequential);
          if (!s.ok()) return PosixError(EIO, kelp::StrCat("read of inode ", ino_, ": ", s.message()));
          break;
        }
      }
      pos = piece_end;
    }
  }
  return absl::OkStatus();
}

void FileData::ReadAhead(const Resolved& res, uint64_t from) {
  // The fetcher reads ahead within a blob; this starts the chunks that follow.
  if (ctx_->fetcher->window() == 0 || from >= res.file_size) return;
  uint64_t ahead = std::min(ctx_->fetcher->window() * ctx_->fetcher->depth(), res.file_size - from);
  for (const filer::VisibleInterval& v : filer::ClipIntervals(res.intervals, from, ahead)) {
    if (v.source != filer::VisibleInterval::Source::kChunk || v.chunk->blob_size() == 0 || v.chunk->fid().empty()) {
      continue;
    }
    for (uint64_t b = v.blob_offset; b < v.blob_offset + v.size; b += ctx_->fetcher->window()) {
      ctx_->fetcher->PrefetchAt(v.chunk->fid(), v.chunk->blob_size(), b);
    }
  }
}

void FileData::ZeroTail(const Resolved& res, uint64_t offset, uint64_t n, char* dst, const Ranges& covered) {
  // Bytes below size that no interval covers (the size grew since the resolution) are zeros
  // unless memory covered them; the resolution is recomputed whenever the size changes, so this
  // only guards against a concurrent extension.
  uint64_t pos = std::min<uint64_t>(offset + n, std::max<uint64_t>(offset, res.file_size));
  if (pos >= offset + n) return;
  for (const auto& [s, e] : covered) {
    if (e <= pos) continue;
    if (s > pos) std::memset(dst + (pos - offset), 0, std::min(s, offset + n) - pos);
    pos = std::max(pos, e);
    if (pos >= offset + n) return;
  }
  std::memset(dst + (pos - offset), 0, offset + n - pos);
}

absl::StatusOr<size_t> FileData::Read(uint64_t offset, size_t len, char* dst, bool sequential) {
  for (int attempt = 0;; ++attempt) {
    RETURN_IF_ERROR(EnsureLoaded());
    std::shared_ptr<const Resolved> res;
    Ranges covered;
    uint64_t n;
    {
      MutexLock lock(mu_);
      if (!loaded_) {
        if (attempt < 5) continue;
        return absl::UnavailableError("file content keeps changing");
      }
      if (offset >= size_) return 0;
      n = std::min<uint64_t>(len, size_ - offset);
      res = ResolvedLocked();
      OverlayMemoryLocked(offset, n, dst, &covered);
    }
    covered = Merge(std::move(covered));
    absl::Status s = FillFromIntervals(*res, offset, n, dst, covered, sequential);
    if (s.code() == absl::StatusCode::kAborted && attempt < 5) {
      // This mount let go of journaled bytes it resolved (memory bound): load them again.
      ctx_->journal_reloads->Inc();
      MarkStale();
      continue;
    }
    RETURN_IF_ERROR(s);
    if (sequential) ReadAhead(*res, offset + n);
    ZeroTail(*res, offset, n, dst, covered);
    return static_cast<size_t>(n);
  }
}

}  // namespace kelp::mount
