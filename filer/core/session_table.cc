#include "filer/core/session_table.h"

#include <random>

#include <fmt/format.h>

#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

SessionTable::SessionTable(Clock* clock, std::chrono::milliseconds timeout)
    : clock_(clock),
      timeout_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count()) {}

std::string SessionTable::Create(std::string_view client) {
  // Unguessable and unique across restarts, so a session id from before a restart never
  // matches a new session by accident.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  MutexLock lock(mu_);
  std::string id = fmt::format("{:016x}{:016x}-{}", rng(), rng(), ++created_);
  Session& s = sessions_[id];
  s.client = std::string(client);
  s.deadline_ns = clock_->MonoNs() + timeout_ns_;
  return id;
}

bool SessionTable::Exists(std::string_view id) const {
  MutexLock lock(mu_);
  return sessions_.count(std::string(id)) > 0;
}

absl::Status SessionTable::Touch(std::string_view id) {
  MutexLock lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return absl::NotFoundError(StrCat("unknown session ", id));
  it->second.deadline_ns = clock_->MonoNs() + timeout_ns_;
  return absl::OkStatus();
}

std::vector<uint64_t> SessionTable::Reattach(std::string_view id, std::string_view client) {
  MutexLock lock(mu_);
  std::vector<uint64_t> freed;
  Session& s = sessions_[std::string(id)];
  if (s.client.empty()) s.client = std::string(client);
  DropOpensLocked(s, &freed);
  s.deadline_ns = clock_->MonoNs() + timeout_ns_;
  return freed;
}

absl::Status SessionTable::Open(std::string_view id, uint64_t ino) {
  MutexLock lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return absl::NotFoundError(StrCat("unknown session ", id));
  ++it->second.open[ino];
  ++open_count_[ino];
  return absl::OkStatus();
}

bool SessionTable::Release(std::string_view id, uint64_t ino) {
  MutexLock lock(mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) return false;
  auto o = it->second.open.find(ino);
  if (o == it->second.open.end()) return false;
  if (--o->second == 0) it->second.open.erase(o);
  auto c = open_count_.find(ino);
  if (--c->second == 0) {
    open_count_.erase(c);
    return true;
  }
  return false;
}

bool SessionTable::IsOpen(uint64_t ino) const {
  MutexLock lock(mu_);
  return open_count_.count(ino) > 0;
}

void SessionTable::DropOpensLocked(Session& s, std::vector<uint64_t>* freed) {
  for (const auto& [ino, n] : s.open) {
    auto c = open_count_.find(ino);
    c->second -= n;
    if (c->second == 0) {
      open_count_.erase(c);
      freed->push_back(ino);
    }
  }
  s.open.clear();
}

std::vector<uint64_t> SessionTable::Expire() {
  MutexLock lock(mu_);
  std::vector<uint64_t> freed;
  int64_t now = clock_->MonoNs();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.deadline_ns <= now) {
      DropOpensLocked(it->second, &freed);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  return freed;
}

size_t SessionTable::sessions() const {
  MutexLock lock(mu_);
  return sessions_.size();
}

}  // namespace kelp::filer
