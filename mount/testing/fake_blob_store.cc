#include "mount/testing/fake_blob_store.h"

#include <algorithm>
#include <cstring>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::mount {

absl::StatusOr<std::string> FakeBlobStore::Put(std::string_view data, bool fsync) {
  if (int e = fail_puts.load()) return PosixError(e, "injected upload failure");
  MutexLock lock(mu_);
  if (!hold_prefix_.empty() && data.substr(0, hold_prefix_.size()) == hold_prefix_) {
    ++held_;
    while (!hold_prefix_.empty()) released_.Wait(lock);
    --held_;
  }
  uint32_t vid = 1 + next_ % std::max<uint32_t>(1, volumes.load());
  std::string fid = kelp::StrCat(vid, ",", next_++, "00000000");
  blobs_.emplace(fid, std::string(data));
  ++puts_;
  if (fsync) {
    ++synced_puts_;
  } else {
    volatile_[fid] = vid;
  }
  return fid;
}

void FakeBlobStore::HoldPutsStartingWith(std::string prefix) {
  MutexLock lock(mu_);
  hold_prefix_ = std::move(prefix);
}

void FakeBlobStore::ReleaseHeld() {
  {
    MutexLock lock(mu_);
    hold_prefix_.clear();
  }
  released_.NotifyAll();
}

size_t FakeBlobStore::held() const {
  MutexLock lock(mu_);
  return held_;
}

absl::Status FakeBlobStore::SyncVolumes(const std::vector<uint32_t>& volume_ids) {
  ++sync_calls_;
  if (int e = fail_syncs.load()) return PosixError(e, "injected sync failure");
  MutexLock lock(mu_);
  synced_volumes_ += volume_ids.size();
  for (auto it = volatile_.begin(); it != volatile_.end();) {
    bool hit = std::find(volume_ids.begin(), volume_ids.end(), it->second) != volume_ids.end();
    it = hit ? volatile_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

size_t FakeBlobStore::volatile_blobs() const {
  MutexLock lock(mu_);
  return volatile_.size();
}

absl::Status FakeBlobStore::Get(std::string_view fid, uint64_t offset, uint64_t length, const volume::ByteSink& sink) {
  if (int e = fail_gets.load()) return PosixError(e, "injected read failure");
  std::string piece;
  {
    MutexLock lock(mu_);
    ++gets_;
    get_lengths_.push_back(length);
    auto it = blobs_.find(fid);
    if (it == blobs_.end()) return PosixError(EIO, kelp::StrCat("no blob ", fid));
    if (offset + length > it->second.size()) return PosixError(EIO, "read past the blob");
    piece = it->second.substr(offset, length);
  }
  bytes_got_ += length;
  return sink(piece);
}

void FakeBlobStore::Discard(const std::vector<std::string>& fids) {
  MutexLock lock(mu_);
  for (const auto& f : fids) {
    blobs_.erase(f);
    volatile_.erase(f);
  }
}

size_t FakeBlobStore::blob_count() const {
  MutexLock lock(mu_);
  return blobs_.size();
}

uint64_t FakeBlobStore::stored_bytes() const {
  MutexLock lock(mu_);
  uint64_t n = 0;
  for (const auto& [k, v] : blobs_) n += v.size();
  return n;
}

}  // namespace kelp::mount
