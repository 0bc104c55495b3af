#include "mount/core/filer_session.h"

#include <vector>

#include "shared/log.h"

namespace kelp::mount {

absl::Status FilerSession::Start(const std::string& client) {
  auto r = meta_->OpenSession(client);
  if (!r.ok()) return r.status();
  {
    std::lock_guard lock(mu_);
    client_ = client;
    id_ = r->session();
    if (r->lease_ms() > 0) lease_ms_ = r->lease_ms();
    stopping_ = false;
  }
  thread_ = std::thread([this] { KeepAliveLoop(); });
  return absl::OkStatus();
}

void FilerSession::Stop() {
  std::map<uint64_t, int> open;
  std::string id;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    open.swap(open_);
    id = id_;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const auto& [ino, n] : open) meta_->Release(id, ino).IgnoreError();
}

std::string FilerSession::id() const {
  std::lock_guard lock(mu_);
  return id_;
}

absl::Status FilerSession::Reattach() {
  std::string id;
  std::vector<uint64_t> inodes;
  {
    std::lock_guard lock(mu_);
    id = id_;
    for (const auto& [ino, n] : open_) inodes.push_back(ino);
  }
  absl::Status s = meta_->KeepAlive(id, inodes, /*reattach=*/true);
  if (s.ok()) {
    spdlog::warn("filer session {} re-attached with {} open files", id, inodes.size());
  } else {
    spdlog::warn("re-attaching filer session {} failed: {}", id, s);
  }
  return s;
}

absl::Status FilerSession::Open(uint64_t ino, bool already_open) {
  std::string id;
  {
    std::lock_guard lock(mu_);
    int& n = open_[ino];
    if (n++ > 0 || already_open) return absl::OkStatus();
    id = id_;
  }
  absl::Status s = meta_->Open(id, ino);
  if (s.code() == absl::StatusCode::kNotFound && Reattach().ok()) s = meta_->Open(id, ino);  // the filer lost us
  if (!s.ok()) {
    std::lock_guard lock(mu_);
    auto it = open_.find(ino);
    if (it != open_.end() && --it->second == 0) open_.erase(it);
  }
  return s;
}

void FilerSession::Release(uint64_t ino) {
  std::string id;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(ino);
    if (it == open_.end()) return;
    if (--it->second > 0) return;
    open_.erase(it);
    id = id_;
  }
  absl::Status s = meta_->Release(id, ino);
  if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
    spdlog::warn("release of inode {} at the filer failed: {}", ino, s);
  }
}

void FilerSession::KeepAliveLoop() {
  std::unique_lock lock(mu_);
  bool reattach = false;
  while (!stopping_) {
    auto wait = std::chrono::milliseconds(reattach ? 1000 : lease_ms_ / 3);
    cv_.wait_for(lock, wait, [&] { return stopping_; });
    if (stopping_) break;
    std::string id = id_;
    std::vector<uint64_t> inodes;
    if (reattach) {
      for (const auto& [ino, n] : open_) inodes.push_back(ino);
    }
    lock.unlock();
    absl::Status s = meta_->KeepAlive(id, inodes, reattach);
    lock.lock();
    if (s.code() == absl::StatusCode::kNotFound && !reattach) {
      spdlog::warn("filer lost session {}; re-attaching it with the open files", id);
      reattach = true;
      continue;
    }
    if (!s.ok()) {
      spdlog::warn("keep-alive of session {} failed: {}", id, s);
      reattach = true;  // the filer may come back without our session: re-announce then
      continue;
    }
    reattach = false;
  }
}

}  // namespace kelp::mount
