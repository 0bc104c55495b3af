#include "volume/store/power_cut_env.h"

#include <algorithm>
#include <cstring>

#include "shared/status.h"

namespace kelp::volume {

// One path's file: the real file (as of its last DataSync) plus what was written since.
class PowerCutEnv::State {
 public:
  State(std::shared_ptr<File> base, uint64_t size)
      : base_(std::move(base)), size_(size), base_valid_(size) {}

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* buf) const {
    ReaderLock l(mu_);
    if (offset >= size_) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    std::memset(buf, 0, n);
    // The disk's bytes, up to where a truncate since the last sync cut them (past that the
    // file reads as zeros unless rewritten).
    if (offset < base_valid_) {
      size_t from_base = static_cast<size_t>(std::min<uint64_t>(n, base_valid_ - offset));
      RETURN_IF_ERROR(base_->ReadAt(offset, from_base, buf).status());
    }
    // Then every unsynced range that meets [offset, offset + n).
    const uint64_t end = offset + n;
    auto it = overlay_.upper_bound(offset);
    if (it != overlay_.begin()) --it;
    for (; it != overlay_.end() && it->first < end; ++it) {
      uint64_t s = std::max(it->first, offset);
      uint64_t e = std::min(it->first + it->second.size(), end);
      if (s < e) std::memcpy(buf + (s - offset), it->second.data() + (s - it->first), e - s);
    }
    return n;
  }

  void Write(uint64_t offset, std::string_view data) {
    WriterLock l(mu_);
    const uint64_t end = offset + data.size();
    Cut(offset, end);
    // Appends (the volume's only kind of write) grow one range instead of adding many.
    auto prev = overlay_.lower_bound(offset);
    if (prev != overlay_.begin() && std::prev(prev)->first + std::prev(prev)->second.size() == offset) {
      std::prev(prev)->second.append(data);
    } else {
      overlay_.emplace(offset, std::string(data));
    }
    size_ = std::max(size_, end);
  }

  void Truncate(uint64_t size) {
    WriterLock l(mu_);
    Cut(size, UINT64_MAX);
    base_valid_ = std::min(base_valid_, size);
    size_ = size;
  }

  // Puts the file on disk as this process sees it, then fdatasyncs it.
  absl::Status Sync() {
    WriterLock l(mu_);
    ASSIGN_OR_RETURN(uint64_t disk_size, base_->Size());
    if (disk_size > base_valid_) RETURN_IF_ERROR(base_->Truncate(base_valid_));
    for (const auto& [off, bytes] : overlay_) RETURN_IF_ERROR(WriteFully(*base_, off, bytes));
    ASSIGN_OR_RETURN(disk_size, base_->Size());
    if (disk_size != size_) RETURN_IF_ERROR(base_->Truncate(size_));
    RETURN_IF_ERROR(base_->DataSync());
    overlay_.clear();
    base_valid_ = size_;
    return absl::OkStatus();
  }

  uint64_t Size() const {
    ReaderLock l(mu_);
    return size_;
  }

  uint64_t UnsyncedBytes() const {
    ReaderLock l(mu_);
    uint64_t n = 0;
    for (const auto& [off, bytes] : overlay_) n += bytes.size();
    return n;
  }

 private:
  // Removes [from, to) from the overlay, keeping the parts of ranges outside it.
  void Cut(uint64_t from, uint64_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = overlay_.upper_bound(from);
    if (it != overlay_.begin() && std::prev(it)->first + std::prev(it)->second.size() > from) --it;
    while (it != overlay_.end() && it->first < to) {
      const uint64_t s = it->first, e = s + it->second.size();
      if (e > to) {  // the part past `to` stays, as a range of its own
        std::string tail = it->second.substr(to - s);
        overlay_.emplace_hint(std::next(it), to, std::move(tail));
      }
      if (s < from) {  // the part before `from` stays where it is
        it->second.resize(from - s);
        ++it;
      } else {
        it = overlay_.erase(it);
      }
    }
  }

  mutable SharedMutex mu_;
  const std::shared_ptr<File> base_;
  uint64_t size_ ABSL_GUARDED_BY(mu_);
  // Bytes of the disk file at or past this offset were cut by a Truncate since the last sync.
  uint64_t base_valid_ ABSL_GUARDED_BY(mu_);
  // offset -> bytes written there since the last sync; ranges never overlap.
  std::map<uint64_t, std::string> overlay_ ABSL_GUARDED_BY(mu_);
};

class PowerCutEnv::PowerCutFile : public File {
 public:
  explicit PowerCutFile(std::shared_ptr<State> state) : state_(std::move(state)) {}

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* buf) const override {
    return state_->ReadAt(offset, n, buf);
  }
  absl::StatusOr<size_t> WriteAt(uint64_t offset, std::string_view data) override {
    state_->Write(offset, data);
    return data.size();
  }
  absl::Status Truncate(uint64_t size) override {
    state_->Truncate(size);
    return absl::OkStatus();
  }
  absl::Status DataSync() override { return state_->Sync(); }
  absl::StatusOr<uint64_t> Size() const override { return state_->Size(); }

 private:
  const std::shared_ptr<State> state_;
};

absl::StatusOr<std::shared_ptr<File>> PowerCutEnv::Open(const std::string& path, bool create) {
  MutexLock l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) {
    ASSIGN_OR_RETURN(std::shared_ptr<File> base, base_->Open(path, create));
    ASSIGN_OR_RETURN(uint64_t size, base->Size());
    it = files_.emplace(path, std::make_shared<State>(std::move(base), size)).first;
  }
  return std::shared_ptr<File>(std::make_shared<PowerCutFile>(it->second));
}

absl::Status PowerCutEnv::Rename(const std::string& from, const std::string& to) {
  MutexLock l(mu_);
  RETURN_IF_ERROR(base_->Rename(from, to));
  files_.erase(to);
  if (auto node = files_.extract(from)) {
    node.key() = to;
    files_.insert(std::move(node));
  }
  return absl::OkStatus();
}

absl::Status PowerCutEnv::Remove(const std::string& path) {
  MutexLock l(mu_);
  RETURN_IF_ERROR(base_->Remove(path));
  files_.erase(path);
  return absl::OkStatus();
}

uint64_t PowerCutEnv::unsynced_bytes() {
  MutexLock l(mu_);
  uint64_t n = 0;
  for (const auto& [path, state] : files_) n += state->UnsyncedBytes();
  return n;
}

}  // namespace kelp::volume
