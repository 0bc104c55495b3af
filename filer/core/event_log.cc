#include "filer/core/event_log.h"

#include <algorithm>

#include "filer/store/coding.h"
#include "filer/store/keys.h"
#include "shared/log.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Event seqs reserved per persisted mark.
constexpr uint64_t kEventSeqStep = 16384;
// Events examined per Trim() step and per subscriber scan.
constexpr size_t kTrimScan = 10'000;
constexpr size_t kReadScan = 1'024;

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
    : kv_(kv), clock_(clock), opts_(opts), seq_(kv, keys::kEventSeq, kEventSeqStep) {}

absl::Status EventLog::Load() {
  if (auto s = seq_.Load(1); !s.ok()) return s;
  uint64_t floor = 1;
  auto v = kv_->Get(keys::MetaKey(keys::kEventFloorName));
  if (v.ok()) {
    if (v->size() != 8) return absl::DataLossError("corrupt event floor");
    floor = DecodeFixed64BE(*v);
  } else if (!absl::IsNotFound(v.status())) {
    return v.status();
  }
  MutexLock lock(mu_);
  published_ = seq_.Peek() - 1;
  floor_ = std::max<uint64_t>(floor, 1);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> EventLog::Reserve(size_t n) {
  MutexLock lock(mu_);
  return seq_.Next(n);
}

absl::Status EventLog::Write(WriteBatch& b, std::vector<Event>& events, bool sync) {
  if (events.empty()) return kv_->Write(b, sync);
  auto first = Reserve(events.size());
  if (!first.ok()) return first.status();
  int64_t now = clock_->WallNs();
  for (size_t i = 0; i < events.size(); ++i) {
    Event& e = events[i];
    e.set_seq(*first + i);
    if (e.time_ns() == 0) e.set_time_ns(now);
    b.Put(keys::EventKey(*first + i), e.SerializeAsString());
  }
  absl::Status s = kv_->Write(b, sync);
  Complete(*first, events.size());
  return s;
}

void EventLog::Complete(uint64_t first, size_t n) {
  {
    MutexLock lock(mu_);
    for (size_t i = 0; i < n; ++i) done_.insert(first + i);
    while (!done_.empty() && *done_.begin() == published_ + 1) {
      done_.erase(done_.begin());
      ++published_;
    }
  }
  cv_.NotifyAll();
}

uint64_t EventLog::published() const {
  MutexLock lock(mu_);
  return published_;
}

uint64_t EventLog::floor() const {
  MutexLock lock(mu_);
  return floor_;
}

bool EventLog::WaitBeyond(uint64_t after, std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  while (!stopped_ && published_ <= after && cv_.WaitUntil(lock, deadline)) {
  }
  return published_ > after;
}

void EventLog::Stop() {
  {
    MutexLock lock(mu_);
    stopped_ = true;
  }
  cv_.NotifyAll();
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
  if (!due || new_floor <= floor) return absl::OkStatus();
  WriteBatch b;
  b.DeleteRange(keys::EventKey(floor), keys::EventKey(new_floor));
  std::string v;
  PutFixed64BE(&v, new_floor);
  b.Put(keys::MetaKey(keys::kEventFloorName), v);
  // Raise the floor first: a reader that sees the new floor rechecks and resets rather than
  // trusting a scan that raced with the delete.
  {
    MutexLock lock(mu_);
    floor_ = new_floor;
  }
  return kv_->Write(b, false);
}

EventSubscription::EventSubscription(EventLog* log, KvStore* kv, Clock* clock, uint64_t cursor,
                                     bool reset_first, std::function<bool(const Event&)> filter)
    : log_(log),
      kv_(kv),
      clock_(clock),
      cursor_(cursor),
      reset_pending_(reset_first),
      filter_(std::move(filter)) {}

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
    uint64_t pub = log_->published();
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
        if (!filter_ || filter_(e)) out.push_back(std::move(e));
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
    if (!log_->WaitBeyond(cursor_ - 1, deadline)) {
      if (log_->stopped()) return absl::UnavailableError("filer is stopping");
      return std::vector<Event>{};
    }
  }
}

}  // namespace kelp::filer
