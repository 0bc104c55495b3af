#include "filer/core/session_table.h"

#include <cerrno>
#include <random>

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/coding.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr size_t kMaxIdLen = 128;
// How long a session seen alive is trusted without reading it again, at most (and never more
// than a tenth of the lease).
constexpr int64_t kKnownMs = 1000;

std::string EncodeSession(int64_t deadline_ms, std::string_view client) {
  std::string v;
  PutVarint64(&v, static_cast<uint64_t>(deadline_ms));
  PutLengthPrefixed(&v, client);
  return v;
}

absl::StatusOr<int64_t> DecodeDeadline(std::string_view v) {
  uint64_t d = 0;
  if (!GetVarint64(&v, &d)) return absl::DataLossError("corrupt session record");
  return static_cast<int64_t>(d);
}

}  // namespace

SessionTable::SessionTable(Clock* clock, std::chrono::milliseconds timeout)
    : clock_(clock), timeout_ms_(timeout.count()) {}

std::string SessionTable::NewId() {
  // Unguessable and unique across filers and restarts.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

absl::Status SessionTable::ValidateId(std::string_view id) {
  if (id.empty()) return PosixError(EINVAL, "empty session id");
  if (id.size() > kMaxIdLen) return PosixError(EINVAL, "session id too long");
  if (id.find('\0') != std::string_view::npos) return PosixError(EINVAL, "session id holds NUL");
  return absl::OkStatus();
}

std::string SessionTable::Key(std::string_view id) { return keys::SessionKey(id); }

void SessionTable::PutSession(WriteBatch& b, std::string_view id, std::string_view client) {
  b.Put(keys::SessionKey(id), EncodeSession(NowMs() + timeout_ms_, client));
  MutexLock lock(mu_);
  known_[std::string(id)] = clock_->MonoNs() + std::min(kKnownMs, timeout_ms_ / 10) * 1'000'000;
}

absl::StatusOr<bool> SessionTable::Exists(KvReader& r, std::string_view id) {
  {
    MutexLock lock(mu_);
    auto it = known_.find(std::string(id));
    if (it != known_.end()) {
      if (it->second > clock_->MonoNs()) return true;
      known_.erase(it);
    }
  }
  ASSIGN_OR_RETURN(bool alive, Alive(r, id));
  if (!alive) return false;
  MutexLock lock(mu_);
  known_[std::string(id)] = clock_->MonoNs() + std::min(kKnownMs, timeout_ms_ / 10) * 1'000'000;
  return true;
}

absl::StatusOr<bool> SessionTable::Alive(KvReader& r, std::string_view id) {
  auto v = r.Get(keys::SessionKey(id));
  if (absl::IsNotFound(v.status())) return false;
  if (!v.ok()) return v.status();
  ASSIGN_OR_RETURN(int64_t deadline, DecodeDeadline(*v));
  return deadline > NowMs();
}

absl::Status SessionTable::AddOpen(KvReader& r, WriteBatch& b, std::string_view id, uint64_t ino,
                                   bool new_inode) {
  std::string hk = keys::HolderKey(ino, id);
  uint64_t n = 0;
  auto v = new_inode ? absl::StatusOr<std::string>(absl::NotFoundError("new")) : r.Get(hk);
  if (v.ok()) {
    std::string_view in = *v;
    if (!GetVarint64(&in, &n)) return absl::DataLossError("corrupt open count");
  } else if (!absl::IsNotFound(v.status())) {
    return v.status();
  }
  std::string nv;
  PutVarint64(&nv, n + 1);
  b.Put(hk, nv);
  if (n == 0) b.Put(keys::SessionOpenKey(id, ino), "");
  return absl::OkStatus();
}

absl::StatusOr<bool> SessionTable::RemoveOpen(KvReader& r, WriteBatch& b, std::string_view id, uint64_t ino,
                                              uint64_t times) {
  std::string hk = keys::HolderKey(ino, id);
  auto v = r.Get(hk);
  if (absl::IsNotFound(v.status())) return false;
  if (!v.ok()) return v.status();
  std::string_view in = *v;
  uint64_t n = 0;
  if (!GetVarint64(&in, &n)) return absl::DataLossError("corrupt open count");
  if (n <= times) {
    b.Delete(hk);
    b.Delete(keys::SessionOpenKey(id, ino));
  } else {
    std::string nv;
    PutVarint64(&nv, n - times);
    b.Put(hk, nv);
  }
  return true;
}

absl::StatusOr<bool> SessionTable::IsOpen(KvReader& r, uint64_t ino, std::string_view except) {
  std::string prefix = keys::HolderPrefix(ino);
  auto it = r.Scan(prefix, keys::PrefixEnd(prefix), except.empty() ? 1 : 2);
  for (; it->Valid(); it->Next()) {
    if (except.empty() || keys::HolderSession(it->key()) != except) return true;
  }
  RETURN_IF_ERROR(it->status());
  return false;
}

absl::StatusOr<std::vector<uint64_t>> SessionTable::OpensOf(KvReader& r, std::string_view id) {
  std::vector<uint64_t> out;
  std::string prefix = keys::SessionOpenPrefix(id);
  auto it = r.Scan(prefix, keys::PrefixEnd(prefix));
  for (; it->Valid(); it->Next()) out.push_back(keys::SessionOpenIno(it->key()));
  RETURN_IF_ERROR(it->status());
  return out;
}

void SessionTable::DropOpens(WriteBatch& b, std::string_view id, const std::vector<uint64_t>& inos) {
  for (uint64_t ino : inos) {
    b.Delete(keys::HolderKey(ino, id));
    b.Delete(keys::SessionOpenKey(id, ino));
  }
}

void SessionTable::DropSession(WriteBatch& b, std::string_view id) {
  b.Delete(keys::SessionKey(id));
  MutexLock lock(mu_);
  known_.erase(std::string(id));
}

absl::StatusOr<SessionTable::Census> SessionTable::Scan(KvReader& r) {
  Census c;
  std::string family = keys::Family(keys::kSession);
  int64_t now = NowMs();
  auto it = r.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    ++c.sessions;
    auto d = DecodeDeadline(it->value());
    if (!d.ok() || *d <= now) c.lapsed.emplace_back(it->key().substr(1));
  }
  RETURN_IF_ERROR(it->status());
  return c;
}

}  // namespace kelp::filer
