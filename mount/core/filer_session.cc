#include "mount/core/filer_session.h"

#include <vector>

#include "shared/log.h"
#include "shared/status.h"

namespace kelp::mount {
namespace {

// How long a release waits for others to go with it.
constexpr std::chrono::milliseconds kReleaseDelay{20};

}  // namespace

absl::Status FilerSession::Start(const std::string& client) {
  auto r = meta_->OpenSession(client);
  if (!r.ok()) return r.status();
  {
    MutexLock lock(mu_);
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
    MutexLock lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    open.swap(open_);
    id = id_;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  std::vector<uint64_t> inodes;
  {
    MutexLock lock(mu_);
    inodes.swap(releases_);
  }
  for (const auto& [ino, n] : open) inodes.push_back(ino);
  if (!id.empty()) SendReleases(std::move(inodes), id);
}

void FilerSession::SendReleases(std::vector<uint64_t> inodes, const std::string& id) {
  if (inodes.empty()) return;
  google::protobuf::RepeatedPtrField<filer::FreedBlob> freed;
  absl::Status s = meta_->Release(id, inodes, &freed);
  if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
    spdlog::warn("release of {} inodes at the filer failed: {}", inodes.size(), s);
  }
  if (on_freed_ && !freed.empty()) on_freed_(freed);
}

void FilerSession::FlushReleases() {
  std::vector<uint64_t> inodes;
  std::string id;
  {
    MutexLock lock(mu_);
    inodes.swap(releases_);
    id = id_;
  }
  SendReleases(std::move(inodes), id);
}

std::string FilerSession::id() const {
  MutexLock lock(mu_);
  return id_;
}

absl::Status FilerSession::Reattach() {
  std::string id;
  std::vector<uint64_t> inodes;
  {
    MutexLock lock(mu_);
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

absl::StatusOr<filer::GetChunksResponse> FilerSession::Open(uint64_t ino, bool with_content) {
  std::string id;
  bool first;
  {
    MutexLock lock(mu_);
    first = open_[ino]++ == 0;
    id = id_;
  }
  absl::StatusOr<filer::GetChunksResponse> r;
  if (first) {
    r = meta_->Open(id, ino, with_content);
    if (r.status().code() == absl::StatusCode::kNotFound && Reattach().ok()) {
      r = meta_->Open(id, ino, with_content);  // the filer lost our session ("unknown session")
    }
  } else {
    auto a = meta_->GetAttr(ino);
    if (a.ok()) {
      r.emplace();
      *r->mutable_attr() = std::move(*a);
    } else {
      r = a.status();
    }
  }
  if (!r.ok()) {
    MutexLock lock(mu_);
    auto it = open_.find(ino);
    if (it != open_.end() && --it->second == 0) {
      open_.erase(it);
      if (!first) releases_.push_back(ino);  // the filer counted an earlier handle
    }
  }
  return r;
}

void FilerSession::OpenedByCreate(uint64_t ino) {
  MutexLock lock(mu_);
  ++open_[ino];
}

void FilerSession::Release(uint64_t ino) {
  bool first;
  {
    MutexLock lock(mu_);
    auto it = open_.find(ino);
    if (it == open_.end()) return;
    if (--it->second > 0) return;
    open_.erase(it);
    first = releases_.empty();
    releases_.push_back(ino);
  }
  // Only the first of a batch wakes the session thread; the rest wait with it.
  if (first) cv_.NotifyAll();
}

void FilerSession::KeepAliveLoop() {
  MutexLock lock(mu_);
  bool reattach = false;
  auto next_keepalive = std::chrono::steady_clock::now();
  while (!stopping_) {
    auto wait = std::chrono::milliseconds(reattach ? 1000 : lease_ms_ / 3);
    while (!stopping_ && releases_.empty() && cv_.WaitUntil(lock, next_keepalive + wait)) {
    }
    if (stopping_) break;
    std::string id = id_;
    if (!releases_.empty()) {
      // Gather the releases of a burst of closes into one call.
      auto gathered_at = std::chrono::steady_clock::now() + kReleaseDelay;
      while (!stopping_ && cv_.WaitUntil(lock, gathered_at)) {
      }
      std::vector<uint64_t> inodes;
      inodes.swap(releases_);
      lock.Unlock();
      SendReleases(std::move(inodes), id);
      lock.Lock();
      if (std::chrono::steady_clock::now() < next_keepalive + wait) continue;
    }
    next_keepalive = std::chrono::steady_clock::now();
    std::vector<uint64_t> inodes;
    if (reattach) {
      for (const auto& [ino, n] : open_) inodes.push_back(ino);
    }
    lock.Unlock();
    absl::Status s = meta_->KeepAlive(id, inodes, reattach);
    lock.Lock();
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
