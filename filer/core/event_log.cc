#include "filer/core/event_log.h"

#include <algorithm>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "filer/store/keys.h"
#include "shared/coding.h"
#include "shared/log.h"
#include "shared/rpc/caller.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Event seqs reserved per persisted mark (stores only this process opens).
constexpr uint64_t kEventSeqStep = 16384;
// Events examined per Trim() step and per subscriber scan.
constexpr size_t kTrimScan = 10'000;
constexpr size_t kReadScan = 1'024;
// Attempts at opening a range before giving up.
constexpr int kOpenAttempts = 50;

std::string EncodeRange(uint64_t limit, int64_t expires_ms, std::string_view owner) {
  std::string v;
  PutVarint64(&v, limit);
  PutVarint64(&v, static_cast<uint64_t>(expires_ms));
  PutLengthPrefixed(&v, owner);
  return v;
}

bool DecodeRange(std::string_view v, uint64_t* limit, int64_t* expires_ms) {
  uint64_t e = 0;
  if (!GetVarint64(&v, limit) || !GetVarint64(&v, &e)) return false;
  *expires_ms = static_cast<int64_t>(e);
  return true;
}

absl::StatusOr<uint64_t> ReadU64(KvReader& r, const std::string& key, uint64_t absent) {
  auto v = r.Get(key);
  if (absl::IsNotFound(v.status())) return absent;
  if (!v.ok()) return v.status();
  if (v->size() != 8) return absl::DataLossError(StrCat("corrupt ", key));
  return DecodeFixed64BE(*v);
}

void Backoff(int attempt) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::this_thread::sleep_for(std::chrono::microseconds(
      std::uniform_int_distribution<int>(100, 1000 << std::min(attempt, 6))(rng)));
}

}  // namespace

Event MakeEvent(EventKind kind, const InodeRecord& rec, uint64_t parent, std::string_view name) {
  Event e;
  e.set_kind(kind);
  e.set_ino(rec.ino);
  e.set_parent(parent);
  e.set_name(std::string(name));
  *e.mutable_attr() = rec.ToAttr();
  return e;
}

EventLog::EventLog(KvStore* kv, Clock* clock, const FilerOptions& opts)
    : kv_(kv), clock_(clock), opts_(opts), seq_(kv, keys::kEventSeq, kEventSeqStep) {
  std::random_device rd;
  owner_ = fmt::format("{:08x}{:08x}", rd(), rd());
}

EventLog::~EventLog() { Stop(); }

absl::Status EventLog::Load() {
  ASSIGN_OR_RETURN(uint64_t floor, ReadU64(*kv_, keys::MetaKey(keys::kEventFloorName), 1));
  if (!shared()) {
    if (auto s = seq_.Load(1); !s.ok()) return s;
    MutexLock lock(mu_);
    published_ = seq_.Peek() - 1;
    floor_ = std::max<uint64_t>(floor, 1);
    return absl::OkStatus();
  }
  auto txn = kv_->Begin();
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(*txn));
  MutexLock lock(mu_);
  floor_ = std::max<uint64_t>(snap.floor, 1);
  ApplySnapshotLocked(snap, snap.q);
  return absl::OkStatus();
}

void EventLog::Start() {
  if (!shared() || poller_.joinable()) return;
  poller_ = std::thread([this] { PollLoop(); });
}

absl::StatusOr<EventLog::Reservation> EventLog::Reserve(size_t n) {
  if (shared()) return ReserveShared(n);
  MutexLock lock(mu_);
  ASSIGN_OR_RETURN(uint64_t first, seq_.Next(n));
  return Reservation{first, {}};
}

absl::Status EventLog::Prepare() {
  if (!shared()) return absl::OkStatus();
  // A range this close to the end of its life would likely be retired by Poll() while the
  // transaction runs; take the next one now instead.
  const int64_t renew = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.event_range_life).count() * 4 / 5;
  {
    MutexLock lock(mu_);
    if (ActiveFreshLocked(renew)) return absl::OkStatus();
  }
  MutexLock open(open_mu_);
  {
    MutexLock lock(mu_);
    if (ActiveFreshLocked(renew)) return absl::OkStatus();
  }
  return OpenRange(1);
}

bool EventLog::ActiveFreshLocked(int64_t renew_ns) const {
  if (active_ == 0) return false;
  const Range& r = own_.at(active_);
  return !r.retired && r.next < r.limit && clock_->MonoNs() - r.opened_mono_ns < renew_ns;
}

bool EventLog::TakeLocked(size_t n, Reservation* out) {
  if (active_ == 0) return false;
  Range& r = own_.at(active_);
  // Age alone does not retire it here (Poll and Prepare do): a transaction that began with
  // this range keeps using it, the one whose key it saw.
  if (r.retired || r.next + n > r.limit) {
    r.retired = true;
    active_ = 0;
    return false;
  }
  out->first = r.next;
  out->guard = keys::EventRangeKey(r.first);
  for (size_t i = 0; i < n; ++i) r.inflight.insert(r.next + i);
  r.next += n;
  return true;
}

absl::StatusOr<EventLog::Reservation> EventLog::ReserveShared(size_t n) {
  Reservation res;
  {
    MutexLock lock(mu_);
    if (TakeLocked(n, &res)) return res;
  }
  MutexLock open(open_mu_);
  {
    MutexLock lock(mu_);
    if (TakeLocked(n, &res)) return res;  // another thread opened one meanwhile
  }
  RETURN_IF_ERROR(OpenRange(n));
  MutexLock lock(mu_);
  if (!TakeLocked(n, &res)) return absl::InternalError("a new event range is already used up");
  return res;
}

absl::StatusOr<EventLog::Snapshot> EventLog::ReadSnapshot(KvReader& r) {
  Snapshot s;
  ASSIGN_OR_RETURN(s.q, ReadU64(r, keys::SequenceKey(keys::kEventSeq), 1));
  s.q = std::max<uint64_t>(s.q, 1);
  ASSIGN_OR_RETURN(s.floor, ReadU64(r, keys::MetaKey(keys::kEventFloorName), 1));
  std::string family = keys::Family(keys::kEventRange);
  auto it = r.Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    uint64_t limit = 0;
    int64_t expires = 0;
    if (it->key().size() != 9 || !DecodeRange(it->value(), &limit, &expires)) {
      return absl::DataLossError("corrupt event range record");
    }
    s.ranges[keys::FirstU64(it->key())] = {limit, expires};
  }
  RETURN_IF_ERROR(it->status());
  return s;
}

void EventLog::ApplySnapshotLocked(const Snapshot& s, uint64_t q_after) {
  // Q only grows, so a snapshot with a lower mark is older than the one held: the ranges it
  // lists may miss some opened since.
  if (q_after < known_q_) return;
  known_q_ = q_after;
  remote_.clear();
  for (const auto& [first, v] : s.ranges) {
    if (!own_.count(first)) remote_.insert(first);
  }
  floor_ = std::max(floor_, s.floor);
  RecomputeLocked();
}

absl::Status EventLog::OpenRange(size_t n) {
  const uint64_t size = std::max<uint64_t>(opts_.event_range_size, n);
  const int64_t expires =
      clock_->WallNs() / 1'000'000 + std::chrono::duration_cast<std::chrono::milliseconds>(opts_.event_range_lease).count();
  for (int attempt = 0;; ++attempt) {
    auto txn = kv_->Begin();
    auto snap = ReadSnapshot(*txn);
    absl::Status s = snap.status();
    if (s.ok()) {
      WriteBatch b;
      std::string q;
      PutFixed64BE(&q, snap->q + size);
      b.Put(keys::SequenceKey(keys::kEventSeq), q);
      b.Put(keys::EventRangeKey(snap->q), EncodeRange(snap->q + size, expires, owner_));
      s = txn->Commit(b, false);
    }
    if (s.ok()) {
      MutexLock lock(mu_);
      Range r;
      r.first = r.next = snap->q;
      r.limit = snap->q + size;
      r.opened_mono_ns = clock_->MonoNs();
      if (active_ != 0) own_.at(active_).retired = true;
      own_[r.first] = std::move(r);
      active_ = snap->q;
      // Nobody could open a range between this transaction's reads and its commit (they
      // would have conflicted on the mark), so its snapshot holds up to the new mark.
      ApplySnapshotLocked(*snap, snap->q + size);
      return absl::OkStatus();
    }
    if (!IsConflict(s) || attempt + 1 >= kOpenAttempts) return s;
    Backoff(attempt);
  }
}

absl::Status EventLog::Write(WriteBatch& b, std::vector<Event>& events, bool sync, KvTxn* txn) {
  auto commit = [&] { return txn != nullptr ? txn->Commit(b, sync) : kv_->Write(b, sync); };
  if (events.empty()) return commit();
  ASSIGN_OR_RETURN(Reservation res, Reserve(events.size()));
  if (!res.guard.empty()) b.Require(res.guard);
  int64_t now = clock_->WallNs();
  const uint64_t origin = rpc::CallerId();
  for (size_t i = 0; i < events.size(); ++i) {
    Event& e = events[i];
    e.set_seq(res.first + i);
    e.set_origin(origin);
    if (e.time_ns() == 0) e.set_time_ns(now);
    b.Put(keys::EventKey(res.first + i), e.SerializeAsString());
  }
  absl::Status s = commit();
  Complete(res.first, events.size(), origin);
  if (!s.ok() && !res.guard.empty()) {
    if (auto missing = MissingKeyOf(s); missing && *missing == res.guard) {
      // Absent from this transaction's snapshot: revoked, or opened after the snapshot was
      // taken (then it is still there). Either way the operation runs again.
      auto cur = kv_->Get(res.guard);
      if (absl::IsNotFound(cur.status())) Revoked(res.guard);
      return ConflictError("the event range is not in this transaction's snapshot");
    }
  }
  return s;
}

void EventLog::Complete(uint64_t first, size_t n, uint64_t origin) {
  {
    MutexLock lock(mu_);
    if (shared()) {
      auto it = own_.upper_bound(first);
      if (it == own_.begin()) return;  // its range was revoked and forgotten
      --it;
      for (size_t i = 0; i < n; ++i) it->second.inflight.erase(first + i);
      RecomputeLocked();
    } else {
      for (size_t i = 0; i < n; ++i) done_.emplace(first + i, origin);
      while (!done_.empty() && done_.begin()->first == published_ + 1) {
        PublishedLocked(published_ + 1, done_.begin()->second);
        done_.erase(done_.begin());
      }
    }
  }
  cv_.NotifyAll();
}

void EventLog::PublishedLocked(uint64_t seq, uint64_t origin) {
  published_ = seq;
  for (auto& [skip, k] : skippers_) {
    if (origin != 0 && origin == skip) continue;  // only that origin's events (or none) up to seq
    k.foreign = seq;
    k.cv->NotifyAll();
  }
}

void EventLog::AddSkipper(uint64_t origin) {
  if (origin == 0) return;
  MutexLock lock(mu_);
  Skipper& k = skippers_[origin];
  // What was published before nobody tracked: it may all be others'.
  if (k.refs++ == 0) k.foreign = published_;
}

void EventLog::RemoveSkipper(uint64_t origin) {
  if (origin == 0) return;
  MutexLock lock(mu_);
  auto it = skippers_.find(origin);
  if (it != skippers_.end() && --it->second.refs == 0) skippers_.erase(it);
}

std::pair<uint64_t, uint64_t> EventLog::Visible(uint64_t skip_origin) const {
  MutexLock lock(mu_);
  auto it = skip_origin == 0 ? skippers_.end() : skippers_.find(skip_origin);
  return {published_, it == skippers_.end() ? published_ : it->second.foreign};
}

void EventLog::Revoked(std::string_view guard) {
  MutexLock lock(mu_);
  if (guard.size() != 9) return;
  uint64_t first = keys::FirstU64(guard);
  auto it = own_.find(first);
  if (it == own_.end()) return;
  spdlog::warn("filer: event range {} was revoked (its lease ran out); taking a new one", first);
  if (active_ == first) active_ = 0;
  own_.erase(it);
  RecomputeLocked();
}

void EventLog::RecomputeLocked() {
  uint64_t w = known_q_;
  if (!remote_.empty()) w = std::min(w, *remote_.begin());
  for (const auto& [first, r] : own_) {
    if (!r.inflight.empty()) {
      w = std::min(w, *r.inflight.begin());
    } else if (!r.retired) {
      w = std::min(w, r.next);
    }
  }
  if (w > 0 && w - 1 > published_) {
    PublishedLocked(w - 1, 0);  // other filers' seqs among them: their origins are not known here
    cv_.NotifyAll();
  }
}

absl::Status EventLog::CloseRangeInStore(uint64_t first, uint64_t limit, bool must_exist) {
  for (int attempt = 0;; ++attempt) {
    auto txn = kv_->Begin();
    // Reading every event key of the range makes a concurrent write into it conflict.
    absl::Status s = txn->Count(keys::EventKey(first), keys::EventKey(limit)).status();
    if (s.ok() && must_exist) {
      auto v = txn->Get(keys::EventRangeKey(first));
      if (absl::IsNotFound(v.status())) return absl::OkStatus();
      s = v.status();
    }
    if (s.ok()) {
      WriteBatch b;
      b.Delete(keys::EventRangeKey(first));
      s = txn->Commit(b, false);
    }
    if (s.ok() || !IsConflict(s) || attempt + 1 >= kOpenAttempts) return s;
    Backoff(attempt);
  }
}

absl::Status EventLog::Poll() {
  if (!shared()) return absl::OkStatus();
  const int64_t life = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.event_range_life).count();
  std::vector<std::pair<uint64_t, uint64_t>> closing;
  {
    MutexLock lock(mu_);
    if (active_ != 0 && clock_->MonoNs() - own_.at(active_).opened_mono_ns >= life) {
      own_.at(active_).retired = true;
      active_ = 0;
    }
    for (auto& [first, r] : own_) {
      if (r.retired && r.inflight.empty() && !r.closing) {
        r.closing = true;
        closing.emplace_back(first, r.limit);
      }
    }
    RecomputeLocked();
  }
  absl::Status result;
  for (const auto& [first, limit] : closing) {
    absl::Status s = CloseRangeInStore(first, limit, false);
    MutexLock lock(mu_);
    if (s.ok()) {
      own_.erase(first);
    } else {
      own_.at(first).closing = false;
      if (result.ok()) result = s;
    }
  }
  Snapshot snap;
  {
    auto txn = kv_->Begin();
    ASSIGN_OR_RETURN(snap, ReadSnapshot(*txn));
  }
  const int64_t now_ms = clock_->WallNs() / 1'000'000;
  std::vector<std::pair<uint64_t, uint64_t>> expired;
  {
    MutexLock lock(mu_);
    for (const auto& [first, v] : snap.ranges) {
      if (!own_.count(first) && v.second < now_ms) expired.emplace_back(first, v.first);
    }
    ApplySnapshotLocked(snap, snap.q);
  }
  for (const auto& [first, limit] : expired) {
    absl::Status s = CloseRangeInStore(first, limit, true);
    if (s.ok()) {
      spdlog::warn("filer: revoked event range [{}, {}) of another filer (its lease ran out)", first, limit);
    } else if (result.ok()) {
      result = s;
    }
  }
  if (!expired.empty()) {
    // Publish past them now rather than at the next poll.
    auto txn = kv_->Begin();
    ASSIGN_OR_RETURN(Snapshot again, ReadSnapshot(*txn));
    MutexLock lock(mu_);
    ApplySnapshotLocked(again, again.q);
  }
  return result;
}

void EventLog::PollLoop() {
  MutexLock lock(mu_);
  while (!stopped_) {
    auto due = std::chrono::steady_clock::now() + opts_.event_poll_interval;
    while (!stopped_ && cv_.WaitUntil(lock, due)) {
    }
    if (stopped_) break;
    lock.Unlock();
    if (auto s = Poll(); !s.ok()) spdlog::warn("filer: event log poll: {}", s);
    lock.Lock();
  }
}

uint64_t EventLog::published() const {
  MutexLock lock(mu_);
  return published_;
}

uint64_t EventLog::floor() const {
  MutexLock lock(mu_);
  return floor_;
}

bool EventLog::WaitBeyond(uint64_t after, std::chrono::steady_clock::time_point deadline,
                          uint64_t skip_origin) {
  MutexLock lock(mu_);
  auto skipper = skip_origin == 0 ? skippers_.end() : skippers_.find(skip_origin);
  ++waiters_;  // seen by others only while this thread is parked in WaitUntil
  if (skipper == skippers_.end()) {
    while (!stopped_ && published_ <= after && cv_.WaitUntil(lock, deadline)) {
    }
    --waiters_;
    return published_ > after;
  }
  // The entry stays while this subscriber is registered (it is one of its refs).
  Skipper& k = skipper->second;
  while (!stopped_ && k.foreign <= after && k.cv->WaitUntil(lock, deadline)) {
  }
  --waiters_;
  return k.foreign > after;
}

int EventLog::waiters() const {
  MutexLock lock(mu_);
  return waiters_;
}

void EventLog::Stop() {
  {
    MutexLock lock(mu_);
    stopped_ = true;
    for (auto& [origin, k] : skippers_) k.cv->NotifyAll();
  }
  cv_.NotifyAll();
  if (poller_.joinable()) poller_.join();
}

bool EventLog::stopped() const {
  MutexLock lock(mu_);
  return stopped_;
}

absl::Status EventLog::Trim() {
  MutexLock trim(trim_mu_);
  uint64_t floor, limit;
  {
    MutexLock lock(mu_);
    floor = floor_;
    limit = published_ + 1;  // never trim what is not published
  }
  // Trim in steps of about 1% of each bound, not a sliver every maintenance tick: each trim
  // leaves a range tombstone behind.
  bool due = false;
  uint64_t new_floor = floor;
  uint64_t min_step = std::clamp<uint64_t>(opts_.event_retention_count / 100, 1, 10'000);
  if (limit > opts_.event_retention_count) {
    new_floor = std::max(new_floor, limit - opts_.event_retention_count);
    due = new_floor >= floor + min_step;
  }
  new_floor = std::min(new_floor, limit);
  // Age: step over old events from there on, a bounded number per call.
  const int64_t age_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.event_retention_age).count();
  const int64_t cutoff = clock_->WallNs() - age_ns;
  auto it = kv_->Scan(keys::EventKey(new_floor), keys::EventKey(limit), kTrimScan);
  for (size_t n = 0; it->Valid() && n < kTrimScan; it->Next(), ++n) {
    Event e;
    if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) break;
    if (e.time_ns() >= cutoff) break;
    if (n == 0 && e.time_ns() < cutoff - age_ns / 100) due = true;
    new_floor = keys::FirstU64(it->key()) + 1;
  }
  if (!it->status().ok()) return it->status();
  it.reset();
  if (!due || new_floor <= floor) return absl::OkStatus();
  // In a transaction that reads the stored floor: two filers trimming at once (a coordinator
  // handover) never lower it.
  auto txn = kv_->Begin();
  ASSIGN_OR_RETURN(uint64_t stored, ReadU64(*txn, keys::MetaKey(keys::kEventFloorName), 1));
  if (stored >= new_floor) {
    MutexLock lock(mu_);
    floor_ = std::max(floor_, stored);
    return absl::OkStatus();
  }
  // From the stored floor, not this filer's: everything below the stored floor is gone (the
  // batch that stored it deleted it), while this filer's may be ahead of it (a floor polled
  // from another filer's trim that was not committed, or our own last failed one).
  WriteBatch b;
  // From the family's first key, which is the same range (nothing is left below the stored
  // floor) starting at a key no event has: RocksDB deletes it with one range tombstone, not
  // event by event (keys::InsertHintPrefix).
  b.DeleteRange(keys::Family(keys::kEvent), keys::EventKey(new_floor));
  std::string v;
  PutFixed64BE(&v, new_floor);
  b.Put(keys::MetaKey(keys::kEventFloorName), v);
  // Raise the floor first: a reader that sees the new floor rechecks and resets rather than
  // trusting a scan that raced with the delete.
  {
    MutexLock lock(mu_);
    floor_ = new_floor;
  }
  absl::Status s = txn->Commit(b, false);
  if (!s.ok()) {
    // Nothing was deleted: the floor is what it was (readers that reset meanwhile skipped
    // only old events, which is what a reset means).
    MutexLock lock(mu_);
    floor_ = std::max(floor, stored);
  }
  return s;
}

EventSubscription::EventSubscription(EventLog* log, KvStore* kv, Clock* clock, uint64_t cursor,
                                     bool reset_first, std::function<bool(const Event&)> filter,
                                     uint64_t skip_origin)
    : log_(log),
      kv_(kv),
      clock_(clock),
      cursor_(cursor),
      reset_pending_(reset_first),
      filter_(std::move(filter)),
      skip_origin_(skip_origin) {
  log_->AddSkipper(skip_origin_);
}

EventSubscription::~EventSubscription() { log_->RemoveSkipper(skip_origin_); }

Event EventSubscription::Reset() {
  Event e;
  e.set_kind(EVENT_RESET);
  e.set_seq(cursor_ - 1);
  e.set_time_ns(clock_->WallNs());
  return e;
}

absl::StatusOr<std::vector<Event>> EventSubscription::Next(size_t max,
                                                            std::chrono::milliseconds wait) {
  if (max == 0) max = 1;
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (log_->stopped()) return absl::UnavailableError("filer is stopping");
    if (reset_pending_) {
      reset_pending_ = false;
      return std::vector<Event>{Reset()};
    }
    uint64_t start = cursor_;
    if (start < log_->floor()) {
      cursor_ = log_->floor();
      return std::vector<Event>{Reset()};
    }
    auto [pub, foreign] = log_->Visible(skip_origin_);
    // From foreign + 1 on, every event is the skipped origin's: no need to read them (unless a
    // filter must see them).
    if (!filter_ && foreign < cursor_ && pub >= cursor_) cursor_ = pub + 1;
    std::vector<Event> out;
    while (cursor_ <= pub && out.size() < max) {
      auto it = kv_->Scan(keys::EventKey(cursor_), keys::EventKey(pub + 1), kReadScan);
      size_t n = 0;
      for (; it->Valid() && n < kReadScan && out.size() < max; it->Next(), ++n) {
        Event e;
        if (!e.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
          return absl::DataLossError(StrCat("corrupt event ", keys::FirstU64(it->key())));
        }
        cursor_ = e.seq() + 1;
        // The filter sees the skipped origin's events too: it may keep track of the tree.
        bool wanted = !filter_ || filter_(e);
        if (wanted && (skip_origin_ == 0 || e.origin() != skip_origin_))
          out.push_back(std::move(e));
      }
      if (!it->status().ok()) return it->status();
      // Read to the end of the range (not stopped by a limit): the rest is gaps.
      if (!it->Valid() && n < kReadScan) cursor_ = pub + 1;
    }
    if (log_->floor() > start) {
      // Trimming raced with this read: events below the new floor may have been missed.
      cursor_ = std::max(cursor_, log_->floor());
      return std::vector<Event>{Reset()};
    }
    if (!out.empty()) return out;
    if (!log_->WaitBeyond(cursor_ - 1, deadline, filter_ ? 0 : skip_origin_)) {
      if (log_->stopped()) return absl::UnavailableError("filer is stopping");
      return std::vector<Event>{};
    }
  }
}

}  // namespace kelp::filer
