#include "filer/core/gc_worker.h"

#include <algorithm>

#include "filer/store/keys.h"
#include "shared/log.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr uint64_t kGcSeqStep = 4096;

int64_t Ms(std::chrono::milliseconds d) { return d.count(); }

}  // namespace

GcWorker::GcWorker(KvStore* kv, ClusterApi* cluster, Clock* clock, const FilerOptions& opts)
    : kv_(kv), cluster_(cluster), clock_(clock), opts_(opts), seq_(kv, keys::kGcSeq, kGcSeqStep) {}

GcWorker::~GcWorker() { Stop(); }

absl::Status GcWorker::Load() {
  if (auto s = seq_.Load(1); !s.ok()) return s;
  int64_t n = 0;
  std::string family = keys::Family(keys::kGc);
  auto it = kv_->Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) ++n;
  if (!it->status().ok()) return it->status();
  pending_ = n;
  return absl::OkStatus();
}

void GcWorker::Start() {
  MutexLock lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  woken_ = pending_.load() > 0;
  thread_ = std::thread([this] { Loop(); });
}

void GcWorker::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void GcWorker::Wake() {
  {
    MutexLock lock(mu_);
    woken_ = true;
  }
  cv_.NotifyAll();
}

absl::Status GcWorker::Enqueue(WriteBatch* batch, const std::vector<std::string>& fids,
                               uint64_t ino) {
  if (fids.empty()) return absl::OkStatus();
  auto first = seq_.Next(fids.size());
  if (!first.ok()) return first.status();
  uint64_t due_ms = static_cast<uint64_t>(clock_->WallNs() / 1'000'000);
  for (size_t i = 0; i < fids.size(); ++i) {
    batch->Put(keys::GcKey(due_ms, *first + i), EncodeGc({fids[i], 0, ino}));
  }
  return absl::OkStatus();
}

int64_t GcWorker::BackoffMs(uint64_t attempts) const {
  int64_t b = Ms(opts_.gc_retry_min);
  for (uint64_t i = 1; i < attempts && b < Ms(opts_.gc_retry_max); ++i) b *= 2;
  return std::min(b, Ms(opts_.gc_retry_max));
}

absl::StatusOr<size_t> GcWorker::RunOnce() {
  MutexLock run(run_mu_);
  // Filers sharing a store leave the queue to the coordinator, which knows the volume servers.
  if (kv_->shared() && !cluster_->IsCoordinator()) return 0;
  uint64_t now_ms = static_cast<uint64_t>(clock_->WallNs() / 1'000'000);
  std::vector<std::string> keys_;
  std::vector<GcValue> values;
  std::vector<std::string> fids;
  size_t batch = std::max<size_t>(opts_.gc_batch, 1);
  auto it = kv_->Scan(keys::Family(keys::kGc), keys::GcKey(now_ms + 1, 0), batch);
  for (; it->Valid() && values.size() < batch; it->Next()) {
    auto v = DecodeGc(it->value());
    if (!v.ok()) return v.status();
    keys_.emplace_back(it->key());
    fids.push_back(v->fid);
    values.push_back(std::move(*v));
  }
  if (!it->status().ok()) return it->status();
  if (values.empty()) return 0;

  std::vector<absl::Status> results = cluster_->DeleteBlobs(fids);
  WriteBatch b;
  size_t deleted = 0, failed = 0;
  std::vector<size_t> retry;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i < results.size() && results[i].ok()) {
      b.Delete(keys_[i]);
      ++deleted;
    } else {
      retry.push_back(i);
    }
  }
  if (!retry.empty()) {
    auto first = seq_.Next(retry.size());
    if (!first.ok()) return first.status();
    for (size_t n = 0; n < retry.size(); ++n) {
      GcValue v = values[retry[n]];
      ++v.attempts;
      uint64_t due = now_ms + static_cast<uint64_t>(BackoffMs(v.attempts));
      b.Delete(keys_[retry[n]]);
      b.Put(keys::GcKey(due, *first + n), EncodeGc(v));
      ++failed;
      if (v.attempts == 1 || v.attempts % 10 == 0) {
        spdlog::warn("gc: delete of {} failed (attempt {}): {}", v.fid, v.attempts,
                     retry[n] < results.size() ? results[retry[n]].ToString() : "no answer");
      }
    }
  }
  if (auto s = kv_->Write(b, false); !s.ok()) return s;
  pending_ -= static_cast<int64_t>(deleted);
  deleted_total_ += deleted;
  failed_total_ += failed;
  return deleted;
}

absl::StatusOr<std::vector<GcValue>> GcWorker::Pending(size_t max) const {
  std::vector<GcValue> out;
  std::string family = keys::Family(keys::kGc);
  auto it = kv_->Scan(family, keys::PrefixEnd(family), max);
  for (; it->Valid() && out.size() < max; it->Next()) {
    auto v = DecodeGc(it->value());
    if (!v.ok()) return v.status();
    out.push_back(std::move(*v));
  }
  if (!it->status().ok()) return it->status();
  return out;
}

void GcWorker::Loop() {
  MutexLock lock(mu_);
  while (!stop_) {
    auto idle_end = std::chrono::steady_clock::now() + opts_.gc_idle_interval;
    while (!stop_ && !woken_ && cv_.WaitUntil(lock, idle_end)) {
    }
    if (stop_) break;
    if (woken_) {
      // Let more garbage gather so it goes out in one batch.
      auto gathered = std::chrono::steady_clock::now() + opts_.gc_gather;
      while (!stop_ && cv_.WaitUntil(lock, gathered)) {
      }
      woken_ = false;
    }
    lock.Unlock();
    for (;;) {
      auto n = RunOnce();
      if (!n.ok()) {
        spdlog::error("gc: {}", n.status());
        break;
      }
      // A full batch means more may be due.
      if (*n < opts_.gc_batch) break;
      MutexLock check(mu_);
      if (stop_) break;
    }
    lock.Lock();
  }
}

}  // namespace kelp::filer
