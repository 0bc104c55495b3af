#include "mount/core/chunk_fetcher.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "shared/log.h"

namespace kelp::mount {

ChunkFetcher::ChunkFetcher(BlobStore* blobs, ChunkCache* cache, ThreadPool* pool, Options options)
    : blobs_(blobs),
      cache_(cache),
      pool_(pool),
      opts_(options),
      buffers_(std::make_shared<BufferPool>(kKeptWindows, options.window, options.window)) {
  auto& reg = MetricsRegistry::Default();
  window_hits_ = reg.GetCounter("kelp_mount_readahead_hits_total", "sequential reads served from a read-ahead window");
  window_loads_ = reg.GetCounter("kelp_mount_readahead_loads_total", "read-ahead windows fetched");
  direct_reads_ = reg.GetCounter("kelp_mount_ranged_reads_total", "random reads fetched as a range");
  fills_ = reg.GetCounter("kelp_mount_cache_fills_total", "cache blocks fetched in the background after a miss");
  fills_skipped_ = reg.GetCounter("kelp_mount_cache_fills_skipped_total",
                                  "misses that left their blocks uncached (every fill slot busy)");
  fills_declined_ =
      reg.GetCounter("kelp_mount_cache_fills_declined_total",
                     "misses that left their blocks uncached because the cache was full "
                     "(one in full_fill_every fetches them)");
  local_skips_ = reg.GetCounter("kelp_mount_cache_local_skips_total",
                                "blobs written or read ahead that the cache did not take, since a "
                                "read-ahead window reads them from a local volume's file");
}

ChunkFetcher::~ChunkFetcher() {
  MutexLock lock(mu_);
  stopping_ = true;
  while (prefetching_ != 0) loaded_.Wait(lock);
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
  if (end - start > len && !MayFill(end - start)) {
    fills_declined_->Inc();
    return blobs_->Read(fid, offset, len, dst);
  }
  if (opts_.max_fills > 0 && pool_ != nullptr && end - start > len) {
    // The reader waits only for its own bytes; the blocks follow in the background.
    absl::Status s = blobs_->Read(fid, offset, len, dst);
    if (s.ok() && !FillInBackground(fid, blob_size, start, end)) fills_skipped_->Inc();
    return s;
  }
  const size_t n = end - start;
  auto buf = std::make_unique_for_overwrite<char[]>(n);
  absl::Status s = blobs_->Read(fid, start, n, buf.get());
  if (!s.ok()) return s;
  InsertBlocks(fid, blob_size, start, std::string_view(buf.get(), n));
  std::memcpy(dst, buf.get() + (offset - start), len);
  return absl::OkStatus();
}

bool ChunkFetcher::MayFill(uint64_t n) {
  if (opts_.full_fill_every <= 1 || cache_->HasRoom(n)) return true;
  return full_misses_.fetch_add(1, std::memory_order_relaxed) % opts_.full_fill_every == 0;
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
    MutexLock lock(mu_);
    if (stopping_ || filling_.size() >= static_cast<size_t>(opts_.max_fills) || filling_.count(key)) return false;
    filling_.insert(key);
    ++prefetching_;
  }
  auto done = [this, key] {
    MutexLock lock(mu_);
    filling_.erase(key);
    --prefetching_;
    loaded_.NotifyAll();
  };
  bool queued = pool_->TrySubmit([this, fid, blob_size, start, end, done] {
    const size_t n = end - start;
    auto buf = std::make_unique_for_overwrite<char[]>(n);
    absl::Status s = blobs_->Read(fid, start, n, buf.get());
    if (s.ok()) {
      InsertBlocks(fid, blob_size, start, std::string_view(buf.get(), n));
      fills_->Inc();
    }
    done();
  });
  if (!queued) done();
  return queued;
}

bool ChunkFetcher::ReadsLocally(const std::string& fid, uint64_t blob_size) {
  if (opts_.window == 0 || blob_size <= opts_.window / 2 || blob_size > opts_.window) return false;
  if (!blobs_->ReadsLocally(fid)) return false;
  local_skips_->Inc();
  return true;
}

void ChunkFetcher::OnUploaded(const std::string& fid, std::string_view blob) {
  if (cache_ == nullptr || !cache_->write_through() || ReadsLocally(fid, blob.size())) return;
  InsertBlocks(fid, blob.size(), 0, blob);
}

void ChunkFetcher::LoadWindow(const std::string& fid, uint64_t blob_size, uint64_t index,
                              const std::shared_ptr<Window>& w) {
  uint64_t start = index * opts_.window;
  uint64_t end = std::min(blob_size, start + opts_.window);
  // Not zeroed first: the cache or the blob fills every byte (a 4 MiB memset per window was a
  // tenth of a sequential reader's CPU).
  const size_t n = end - start;
  // A whole window goes into a buffer an earlier one gave back; a blob's short last one into
  // its own (a small blob does not hold a whole window's memory; the pool keeps only whole ones).
  BufferPool::Buffer data = buffers_->Take(n);
  absl::Status s;
  if (cache_ == nullptr || !cache_->Read(fid, blob_size, start, n, data.get())) {
    s = blobs_->Read(fid, start, n, data.get());
    // Past a full cache, a window inserted pushes out the oldest blocks, which for a file
    // read in the order it was written (a sequential read after a write a little larger than
    // the cache) are the ones this reader needs next: each miss then made the next one, and a
    // 1 GiB file written through a 1000 MiB cache was read back almost entirely from the
    // volume servers while its blocks were written into the cache a second time.
    if (s.ok() && cache_ != nullptr && !ReadsLocally(fid, blob_size)) {
      if (MayFill(n)) {
        InsertBlocks(fid, blob_size, start, std::string_view(data.get(), n));
      } else {
        fills_declined_->Inc();
      }
    }
  }
  window_loads_->Inc();
  if (!s.ok()) buffers_->Give(std::move(data));
  MutexLock lock(mu_);
  w->loading = false;
  w->status = s;
  if (s.ok()) {
    w->data = std::move(data);
    w->size = n;
    w->buffers = buffers_;
  } else {
    // A failed window is not kept: the next reader tries again (maybe another replica).
    auto it = windows_.find(Key{fid, index});
    if (it != windows_.end() && it->second.first == w) {
      lru_.erase(it->second.second);
      windows_.erase(it);
    }
  }
  loaded_.NotifyAll();
}

std::shared_ptr<ChunkFetcher::Window> ChunkFetcher::GetWindow(const std::string& fid, uint64_t blob_size,
                                                              uint64_t index) {
  MutexLock lock(mu_);
  Key key{fid, index};
  auto it = windows_.find(key);
  if (it != windows_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
    std::shared_ptr<Window> w = it->second.first;
    while (w->loading) loaded_.Wait(lock);
    window_hits_->Inc();
    return w;
  }
  auto w = std::make_shared<Window>();
  lru_.push_front(key);
  windows_.emplace(key, std::make_pair(w, lru_.begin()));
  EvictLocked();
  lock.Unlock();
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
    MutexLock lock(mu_);
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
    MutexLock lock(mu_);
    --prefetching_;
    loaded_.NotifyAll();
  });
  if (!queued) {  // pool busy: drop the placeholder, a reader will load it itself
    MutexLock lock(mu_);
    --prefetching_;
    w->loading = false;
    w->status = absl::UnavailableError("prefetch not queued");
    auto it = windows_.find(Key{fid, index});
    if (it != windows_.end() && it->second.first == w) {
      lru_.erase(it->second.second);
      windows_.erase(it);
    }
    loaded_.NotifyAll();
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
    uint64_t n = std::min<uint64_t>(end, wstart + w->size) - pos;
    if (n == 0) return absl::InternalError("read-ahead window shorter than the blob");
    std::memcpy(dst + (pos - offset), w->data.get() + (pos - wstart), n);
    pos += n;
    if (pos >= wstart + opts_.window / 2) {
      for (int d = 1; d <= opts_.depth; ++d) Prefetch(fid, blob_size, index + d);
    }
  }
  return absl::OkStatus();
}

void ChunkFetcher::Forget(const google::protobuf::RepeatedPtrField<filer::FreedBlob>& blobs) {
  if (cache_ == nullptr || blobs.empty()) return;
  // An index erase under the cache's lock per block (a 1 GiB file: 4,096), the files deleted
  // later by the cache's own thread: off the caller's path (an fsync's commit, an unlink).
  auto forget = [cache = cache_, freed = std::vector<filer::FreedBlob>(blobs.begin(), blobs.end())] {
    for (const filer::FreedBlob& b : freed) cache->Forget(b.fid(), b.size());
  };
  if (pool_ == nullptr || !pool_->TrySubmit(forget)) forget();
}

}  // namespace kelp::mount
