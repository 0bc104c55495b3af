#include "filer/cluster/lease.h"

#include "filer/store/keys.h"
#include "shared/coding.h"
#include "shared/log.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

std::string Encode(const CoordinatorLease::Holder& h) {
  std::string v;
  PutVarint64(&v, h.epoch);
  PutVarint64(&v, static_cast<uint64_t>(h.expires_ms));
  PutLengthPrefixed(&v, h.id);
  PutLengthPrefixed(&v, h.grpc_address);
  PutLengthPrefixed(&v, h.http_address);
  PutVarint64(&v, h.total_bytes);
  PutVarint64(&v, h.free_bytes);
  return v;
}

absl::StatusOr<CoordinatorLease::Holder> Decode(std::string_view v) {
  CoordinatorLease::Holder h;
  uint64_t expires = 0;
  std::string_view id, grpc, http;
  if (!GetVarint64(&v, &h.epoch) || !GetVarint64(&v, &expires) || !GetLengthPrefixed(&v, &id) ||
      !GetLengthPrefixed(&v, &grpc) || !GetLengthPrefixed(&v, &http) || !GetVarint64(&v, &h.total_bytes) ||
      !GetVarint64(&v, &h.free_bytes)) {
    return absl::DataLossError("corrupt coordinator lease record");
  }
  h.expires_ms = static_cast<int64_t>(expires);
  h.id = std::string(id);
  h.grpc_address = std::string(grpc);
  h.http_address = std::string(http);
  return h;
}

}  // namespace

absl::StatusOr<std::optional<CoordinatorLease::Holder>> CoordinatorLease::Read(KvReader& kv) {
  auto v = kv.Get(keys::MetaKey(keys::kCoordinatorName));
  if (absl::IsNotFound(v.status())) return std::optional<Holder>();
  if (!v.ok()) return v.status();
  ASSIGN_OR_RETURN(Holder h, Decode(*v));
  return std::optional<Holder>(std::move(h));
}

absl::Status CoordinatorLease::CheckNoFilerRunning(KvStore& kv) {
  if (!kv.shared()) return absl::OkStatus();  // RocksDB's own lock says so
  ASSIGN_OR_RETURN(auto h, Read(kv));
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  if (h && h->expires_ms > now) {
    return absl::FailedPreconditionError(StrCat("the store is in use: filer ", h->id, " (", h->http_address,
                                                ") holds the coordinator lease; stop every filer on it first"));
  }
  return absl::OkStatus();
}

CoordinatorLease::CoordinatorLease(KvStore* kv, Options options) : kv_(kv), opts_(std::move(options)) {}

CoordinatorLease::~CoordinatorLease() { Stop(); }

void CoordinatorLease::SetAddresses(std::string grpc_address, std::string http_address) {
  opts_.grpc_address = std::move(grpc_address);
  opts_.http_address = std::move(http_address);
}

int64_t CoordinatorLease::WallMs() const {
  if (opts_.wall_ms) return opts_.wall_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t CoordinatorLease::MonoMs() const {
  if (opts_.mono_ms) return opts_.mono_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status CoordinatorLease::Start() {
  if (!kv_->shared()) {
    MutexLock lock(mu_);
    Holder me{opts_.id, opts_.grpc_address, opts_.http_address, 0, 1, 0, 0};
    holder_ = me;
    SetHolderLocked(true);
  }
  if (!kv_->shared()) {
    Notify();
    return absl::OkStatus();
  }
  if (auto s = RunOnce(); !s.ok()) spdlog::warn("filer: coordinator lease: {}", s);
  {
    MutexLock lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void CoordinatorLease::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (!kv_->shared()) return;
  bool held;
  {
    MutexLock lock(mu_);
    held = held_until_mono_ms_ > MonoMs();
    SetHolderLocked(false);
    held_until_mono_ms_ = 0;
  }
  Notify();
  if (!held) return;
  // Release: expire the row now, if it is still ours, so the next filer need not wait.
  auto txn = kv_->Begin();
  auto v = txn->Get(keys::MetaKey(keys::kCoordinatorName));
  if (!v.ok()) return;
  auto h = Decode(*v);
  if (!h.ok() || h->id != opts_.id) return;
  h->expires_ms = 0;
  WriteBatch b;
  b.Put(keys::MetaKey(keys::kCoordinatorName), Encode(*h));
  if (auto s = txn->Commit(b, false); !s.ok()) spdlog::warn("filer: release of the coordinator lease: {}", s);
}

absl::Status CoordinatorLease::RunOnce() {
  absl::Status s = TryOnce();
  Notify();
  return s;
}

absl::Status CoordinatorLease::TryOnce() {
  if (!kv_->shared()) return absl::OkStatus();
  const int64_t t0 = MonoMs();
  const int64_t now = WallMs();
  auto txn = kv_->Begin();
  auto v = txn->Get(keys::MetaKey(keys::kCoordinatorName));
  std::optional<Holder> cur;
  if (v.ok()) {
    auto h = Decode(*v);
    if (h.ok()) cur = std::move(*h);  // a corrupt record is overwritten
  } else if (!absl::IsNotFound(v.status())) {
    return v.status();
  }
  if (cur && cur->id != opts_.id && cur->expires_ms > now) {
    MutexLock lock(mu_);
    holder_ = cur;
    held_until_mono_ms_ = 0;
    SetHolderLocked(false);
    return absl::OkStatus();
  }
  Holder me;
  me.id = opts_.id;
  me.grpc_address = opts_.grpc_address;
  me.http_address = opts_.http_address;
  me.expires_ms = now + opts_.lease.count();
  me.epoch = cur ? (cur->id == opts_.id ? cur->epoch : cur->epoch + 1) : 1;
  if (opts_.capacity) std::tie(me.total_bytes, me.free_bytes) = opts_.capacity();
  WriteBatch b;
  b.Put(keys::MetaKey(keys::kCoordinatorName), Encode(me));
  absl::Status s = txn->Commit(b, false);
  MutexLock lock(mu_);
  if (!s.ok()) {
    // Lost a race (another filer took it) or the store is down: not the holder for sure
    // once what we held runs out.
    if (held_until_mono_ms_ <= MonoMs()) SetHolderLocked(false);
    return IsConflict(s) ? absl::OkStatus() : s;
  }
  if (!cur || cur->id != opts_.id) {
    spdlog::info("filer {}: now the coordinator (lease epoch {})", opts_.id, me.epoch);
  }
  holder_ = me;
  held_until_mono_ms_ = t0 + opts_.lease.count() * 3 / 4;
  SetHolderLocked(true);
  return absl::OkStatus();
}

void CoordinatorLease::SetHolderLocked(bool holder) {
  if (holder == was_holder_) return;
  was_holder_ = holder;
  if (!holder) spdlog::info("filer {}: no longer the coordinator", opts_.id);
  changes_.push_back(holder);
}

void CoordinatorLease::Notify() {
  std::vector<bool> changes;
  {
    MutexLock lock(mu_);
    changes.swap(changes_);
  }
  if (!opts_.on_change) return;
  for (bool c : changes) opts_.on_change(c);
}

bool CoordinatorLease::IsHolder() const {
  if (!kv_->shared()) return true;
  MutexLock lock(mu_);
  return held_until_mono_ms_ > MonoMs();
}

std::optional<CoordinatorLease::Holder> CoordinatorLease::holder() const {
  MutexLock lock(mu_);
  return holder_;
}

void CoordinatorLease::Loop() {
  // The holder renews every third of the lease; the others look every sixth, so a dead
  // holder is replaced within about 1.2 leases.
  MutexLock lock(mu_);
  while (!stop_) {
    auto wait = held_until_mono_ms_ > MonoMs() ? opts_.lease / 3 : opts_.lease / 6;
    auto due = std::chrono::steady_clock::now() + wait;
    while (!stop_ && cv_.WaitUntil(lock, due)) {
    }
    if (stop_) break;
    lock.Unlock();
    if (auto s = RunOnce(); !s.ok()) spdlog::warn("filer: coordinator lease: {}", s);
    lock.Lock();
    if (held_until_mono_ms_ != 0 && held_until_mono_ms_ <= MonoMs()) SetHolderLocked(false);
    lock.Unlock();
    Notify();
    lock.Lock();
  }
}

}  // namespace kelp::filer
