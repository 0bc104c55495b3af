#include "mount/core/chunk_fetcher.h"

#include <algorithm>
#include <cstring>

#include "shared/log.h"

namespace kelp::mount {

ChunkFetcher::ChunkFetcher(BlobStore* blobs, ChunkCache* cache, ThreadPool* pool, Options options)
    : blobs_(blobs), cache_(cache), pool_(pool), opts_(options) {
  auto& reg = MetricsRegistry::Default();
  window_hits_ = reg.GetCounter("kelp_mount_readahead_hits_total", "sequential reads served from a read-ahead window");
  window_loads_ = reg.GetCounter("kelp_mount_readahead_loads_total", "read-ahead windows fetched");
  direct_reads_ = reg.GetCounter("kelp_mount_ranged_reads_total", "random reads fetched as a range");
  fills_ = reg.GetCounter("kelp_mount_cache_fills_total", "cache blocks fetched in the background after a miss");
  fills_skipped_ = reg.GetCounter("kelp_mount_cache_fills_skipped_total",
                                  "misses that left their blocks uncached (every fill slot busy)");
}

ChunkFetcher::~ChunkFetcher() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  loaded_.wait(lock, [&] { return prefetching_ == 0; });
}

absl::Status ChunkFetcher::Read(const std::string& fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst,
                                bool sequential) {
  if (len == 0) return absl::OkStatus();
  if (sequential && opts_.window > 0 && blob_size > 0 && offset + len <= blob_size) {
    return ReadWindowed(fid, blob_size, offset, len, dst);
  }
  return ReadDirect(fid, blob_size, offset, len, dst);
}

absl::Status ChunkFetcher::ReadDirect(const std::string& fid, uint64_t blob_size, uint64_t offset, size_t len,
                                      char* dst) {
  direct_reads_->Inc();
  if (cache_ == nullptr || blob_size == 0 || offset + len > blob_size) {
    return blobs_->Read(fid, offset, len, dst);
  }
  if (cache_->Read(fid, blob_size, offset, len, dst)) return absl::OkStatus();
  uint64_t bs = cache_->BlockSize(blob_size);
  if (bs == 0) return blobs_->Read(fid, offset, len, dst);
  uint64_t start = offset / bs * bs;
  uint64_t end = std::min(blob_size, (offset + len + bs - 1) / bs * bs);
  if (opts_.max_fills > 0 && pool_ != nullptr && end - start > len) {
    // The reader waits only for its own bytes; the blocks follow in the background.
    absl::Status s = blobs_->Read(fid, offset, len, dst);
    if (s.ok() && !FillInBackground(fid, blob_size, start, end)) fills_skipped_->Inc();
    return s;
  }
  std::string buf(end - start, '\0');
  absl::Status s = blobs_->Read(fid, start, buf.size(), buf.data());
  if (!s.ok()) return s;
  InsertBlocks(fid, blob_size, start, buf);
  std::memcpy(dst, buf.data() + (offset - start), len);
  return absl::OkStatus();
}

void ChunkFetcher::InsertBlocks(const std::string& fid, uint64_t blob_size, uint64_t start, std::string_view data) {
  if (cache_ == nullptr || blob_size == 0) return;
  uint64_t bs = cache_->BlockSize(blob_size);
  if (bs == 0 || start % bs != 0) return;
  for (uint64_t pos = 0; pos < data.size(); pos += bs) {
    uint64_t n = std::min<uint64_t>(bs, data.size() - pos);
    // Only whole blocks (or the blob's tail) are cache entries.
    if (n < bs && start + pos + n != blob_size) break;
    cache_->Insert(fid, blob_size, start + pos, data.substr(pos, n));
  }
}

bool ChunkFetcher::FillInBackground(const std::string& fid, uint64_t blob_size, uint64_t start, uint64_t end) {
  Key key{fid, start};
  {
    std::lock_guard lock(mu_);
    if (stopping_ || filling_.size() >= static_cast<size_t>(opts_.max_fills) || filling_.count(key)) return false;
    filling_.insert(key);
    ++prefetching_;
  }
  auto done = [this, key] {
    std::lock_guard lock(mu_);
    filling_.erase(key);
    --prefetching_;
    loaded_.notify_all();
  };
  bool queued = pool_->TrySubmit([this, fid, blob_size, start, end, done] {
    std::string buf(end - start, '\0');
    absl::Status s = blobs_->Read(fid, start, buf.size(), buf.data());
    if (s.ok()) {
      InsertBlocks(fid, blob_size, start, buf);
      fills_->Inc();
    }
    done();
  });
  if (!queued) done();
  return queued;
}

void ChunkFetcher::OnUploaded(const std::string& fid, std::string_view blob) {
  if (cache_ == nullptr || !cache_->write_through()) return;
  InsertBlocks(fid, blob.size(), 0, blob);
}

void ChunkFetcher::LoadWindow(const std::string& fid, uint64_t blob_size, uint64_t index,
                              const std::shared_ptr<Window>& w) {
  uint64_t start = index * opts_.window;
  uint64_t end = std::min(blob_size, start + opts_.window);
  std::string data(end - start, '\0');
  absl::Status s;
  if (cache_ == nullptr || !cache_->Read(fid, blob_size, start, data.size(), data.data())) {
    s = blobs_->Read(fid, start, data.size(), data.data());
    if (s.ok()) InsertBlocks(fid, blob_size, start, data);
  }
  window_loads_->Inc();
  std::lock_guard lock(mu_);
  w->loading = false;
  w->status = s;
  if (s.ok()) {
    w->data = std::move(data);
  } else {
    // A failed window is not kept: the next reader tries again (maybe another replica).
    auto it = windows_.find(Key{fid, index});
    if (it != windows_.end() && it->second.first == w) {
      lru_.erase(it->second.second);
      windows_.erase(it);
    }
  }
  loaded_.notify_all();
}

std::shared_ptr<ChunkFetcher::Window> ChunkFetcher::GetWindow(const std::string& fid, uint64_t blob_size,
                                                              uint64_t index) {
  std::unique_lock lock(mu_);
  Key key{fid, index};
  auto it = windows_.find(key);
  if (it != windows_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
    std::shared_ptr<Window> w = it->second.first;
    loaded_.wait(lock, [&] { return !w->loading; });
    window_hits_->Inc();
    return w;
  }
  auto w = std::make_shared<Window>();
  lru_.push_front(key);
  windows_.emplace(key, std::make_pair(w, lru_.begin()));
  EvictLocked();
  lock.unlock();
  LoadWindow(fid, blob_size, index, w);
  return w;
}

void ChunkFetcher::EvictLocked() {
  while (windows_.size() > opts_.max_windows && !lru_.empty()) {
    Key victim = lru_.back();
    auto it = windows_.find(victim);
    if (it->second.first->loading) break;  // its loader still needs it; evict later
    lru_.pop_back();
    windows_.erase(it);
  }
}

void ChunkFetcher::Prefetch(const std::string& fid, uint64_t blob_size, uint64_t index) {
  if (pool_ == nullptr || index * opts_.window >= blob_size) return;
  std::shared_ptr<Window> w;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    Key key{fid, index};
    if (windows_.count(key)) return;
    w = std::make_shared<Window>();
    lru_.push_front(key);
    windows_.emplace(key, std::make_pair(w, lru_.begin()));
    EvictLocked();
    ++prefetching_;
  }
  bool queued = pool_->TrySubmit([this, fid, blob_size, index, w] {
    LoadWindow(fid, blob_size, index, w);
    std::lock_guard lock(mu_);
    --prefetching_;
    loaded_.notify_all();
  });
  if (!queued) {  // pool busy: drop the placeholder, a reader will load it itself
    std::lock_guard lock(mu_);
    --prefetching_;
    w->loading = false;
    w->status = absl::UnavailableError("prefetch not queued");
    auto it = windows_.find(Key{fid, index});
    if (it != windows_.end() && it->second.first == w) {
      lru_.erase(it->second.second);
      windows_.erase(it);
    }
    loaded_.notify_all();
  }
}

void ChunkFetcher::PrefetchAt(const std::string& fid, uint64_t blob_size, uint64_t blob_offset) {
  if (opts_.window == 0 || blob_size == 0 || blob_offset >= blob_size) return;
  Prefetch(fid, blob_size, blob_offset / opts_.window);
}

absl::Status ChunkFetcher::ReadWindowed(const std::string& fid, uint64_t blob_size, uint64_t offset, size_t len,
                                        char* dst) {
  uint64_t pos = offset, end = offset + len;
  while (pos < end) {
    uint64_t index = pos / opts_.window;
    uint64_t wstart = index * opts_.window;
    std::shared_ptr<Window> w = GetWindow(fid, blob_size, index);
    if (!w->status.ok()) {
      // One retry in this thread (a prefetch may have failed for a reason that passed).
      w = GetWindow(fid, blob_size, index);
      if (!w->status.ok()) return w->status;
    }
    uint64_t n = std::min<uint64_t>(end, wstart + w->data.size()) - pos;
    if (n == 0) return absl::InternalError("read-ahead window shorter than the blob");
    std::memcpy(dst + (pos - offset), w->data.data() + (pos - wstart), n);
    pos += n;
    if (pos >= wstart + opts_.window / 2) {
      for (int d = 1; d <= opts_.depth; ++d) Prefetch(fid, blob_size, index + d);
    }
  }
  return absl::OkStatus();
}

}  // namespace kelp::mount
