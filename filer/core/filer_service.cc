// FilerService construction, start/stop, maintenance, and the helpers every operation shares.
// The operations themselves live one per file (create.cc, rename.cc, ...).
#include "filer/core/filer_service.h"

#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "filer/core/mutation.h"
#include "filer/store/keys.h"
#include "shared/coding.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

// Numbers reserved per persisted mark.
constexpr uint64_t kInodeSeqStep = 16384;
constexpr uint64_t kChunkSeqStep = 65536;
// Orphans examined per maintenance round.
constexpr size_t kOrphanScan = 10'000;
// Deepest directory nesting IsWithin walks before calling the tree corrupt.
constexpr int kMaxDepth = 65536;

}  // namespace

FilerService::FilerService(KvStore* kv, ClusterApi* cluster, FilerOptions options)
    : kv_(kv),
      cluster_(cluster),
      opts_(options),
      clock_(options.clock ? options.clock : RealClock()),
      locks_(options.lock_stripes),
      inode_seq_(kv, keys::kInodeSeq, kInodeSeqStep),
      chunk_seq_(kv, keys::kChunkSeq, kChunkSeqStep),
      events_(kv, clock_, opts_),
      sessions_(clock_, opts_.session_timeout),
      gc_(kv, cluster, clock_, opts_),
      counters_(std::make_unique<std::atomic<int64_t>[]>(locks_.stripes())),
      txn_retries_(MetricsRegistry::Default().GetCounter(
          "kelp_filer_txn_retries_total",
          "Filer operations run again because another filer changed what they read (shared stores)")) {}

FilerService::~FilerService() { Stop(); }

absl::Status FilerService::Start() {
  if (started_) return absl::FailedPreconditionError("filer already started");
  RETURN_IF_ERROR(inode_seq_.Load(keys::kRootIno + 1));
  RETURN_IF_ERROR(chunk_seq_.Load(1));
  RETURN_IF_ERROR(events_.Load());
  RETURN_IF_ERROR(gc_.Load());
  RETURN_IF_ERROR(LoadCounters());
  RETURN_IF_ERROR(LoadJournalQueue());
  RETURN_IF_ERROR(EnsureRoot());
  // Mounts re-announce their open files after a restart (KeepAlive with reattach), and orphans
  // wait for that; a store without sessions has no mount that could, so nothing waits.
  ASSIGN_OR_RETURN(SessionTable::Census census, sessions_.Scan(*kv_));
  orphan_grace_end_mono_ns_ =
      clock_->MonoNs() +
      (census.sessions == 0
           ? 0
           : std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.orphan_grace).count());
  {
    MutexLock lock(loop_mu_);
    stopping_ = false;
  }
  if (opts_.background_loops) {
    gc_.Start();
    events_.Start();
    maintenance_ = std::thread([this] { MaintenanceLoop(); });
  }
  auto& reg = MetricsRegistry::Default();
  metric_callbacks_ = {
      reg.AddCallback("kelp_filer_inodes", "Inodes in the namespace",
                      [this] { return static_cast<double>(InodeCount()); }),
      reg.AddCallback("kelp_filer_sessions", "Client sessions in the store (at the last maintenance round)",
                      [this] { return static_cast<double>(session_count_.load()); }),
      reg.AddCallback("kelp_filer_event_seq", "Last published event sequence",
                      [this] { return static_cast<double>(events_.published()); }),
      reg.AddCallback("kelp_filer_gc_deleted_total", "Blobs deleted by chunk GC",
                      [this] { return static_cast<double>(gc_.deleted_total()); }),
      reg.AddCallback("kelp_filer_gc_pending", "Blobs in the GC queue (due or waiting to retry)",
                      [this] { return static_cast<double>(gc_.pending()); }),
      reg.AddCallback("kelp_filer_gc_failed_total", "Blob deletes that failed and were retried",
                      [this] { return static_cast<double>(gc_.failed_total()); }),
  };
  started_ = true;
  return absl::OkStatus();
}

void FilerService::Stop() {
  if (!started_.exchange(false)) return;
  for (int id : metric_callbacks_) MetricsRegistry::Default().RemoveCallback(id);
  metric_callbacks_.clear();
  {
    MutexLock lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.NotifyAll();
  if (maintenance_.joinable()) maintenance_.join();
  gc_.Stop();
  events_.Stop();
  if (auto s = kv_->Sync(); !s.ok()) spdlog::error("filer: sync at stop: {}", s);
}

absl::Status FilerService::EnsureRoot() {
  auto format = kv_->Get(keys::MetaKey(keys::kFormatVersionName));
  if (format.ok()) {
    if (format->size() != 8 || DecodeFixed64BE(*format) != keys::kFormatVersion) {
      return absl::FailedPreconditionError("filer store has an unknown format version");
    }
  } else if (!absl::IsNotFound(format.status())) {
    return format.status();
  }
  auto root = kv_->Get(keys::InodeKey(keys::kRootIno));
  if (root.ok()) return absl::OkStatus();
  if (!absl::IsNotFound(root.status())) return root.status();

  // Two filers starting on one empty store: one creates the root, the other conflicts, runs
  // again and finds it.
  RETURN_IF_ERROR(Transact([&]() -> absl::Status {
    auto guard = locks_.Lock({keys::kRootIno});
    auto again = rd().Get(keys::InodeKey(keys::kRootIno));
    if (again.ok()) return absl::OkStatus();
    if (!absl::IsNotFound(again.status())) return again.status();
    Mutation m(this, guard);
    std::string v;
    PutFixed64BE(&v, keys::kFormatVersion);
    m.batch().Put(keys::MetaKey(keys::kFormatVersionName), v);
    InodeRecord r;
    r.ino = keys::kRootIno;
    r.mode = S_IFDIR | 0755;
    r.nlink = 2;
    r.atime_ns = r.mtime_ns = r.ctime_ns = r.crtime_ns = NowNs();
    r.generation = 1;
    r.parent = keys::kRootIno;
    PutInode(m, r);
    m.AdjustInodes(1);
    return m.Commit();
  }));
  return kv_->Sync();
}

absl::Status FilerService::LoadCounters() {
  const size_t n = locks_.stripes();
  for (size_t i = 0; i < n; ++i) counters_[i] = 0;
  std::string family = keys::Family(keys::kCounter);
  int64_t folded = 0;
  WriteBatch fix;
  auto it = kv_->Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    std::string_view key = it->key();
    auto value = DecodeCounter(it->value());
    if (key.size() != 5 || !value.ok()) return absl::DataLossError("corrupt counter");
    uint32_t stripe = keys::CounterStripe(key);
    if (stripe < n) {
      counters_[stripe] = *value;
    } else {
      // Written with more lock stripes than now: fold it into stripe 0.
      folded += *value;
      fix.Delete(key);
    }
  }
  RETURN_IF_ERROR(it->status());
  // Folding another filer's keys could race with its writes: only a store this process owns.
  if (fix.empty() || kv_->shared()) return absl::OkStatus();
  counters_[0] += folded;
  fix.Put(keys::CounterKey(0), EncodeCounter(counters_[0].load()));
  return kv_->Write(fix, true);
}

int64_t FilerService::InodeCount() {
  if (!kv_->shared()) {
    // Not a snapshot across stripes; exact whenever no mutation is in flight.
    int64_t sum = 0;
    for (size_t i = 0; i < locks_.stripes(); ++i) sum += counters_[i].load(std::memory_order_relaxed);
    return sum;
  }
  MutexLock lock(count_mu_);
  int64_t now = clock_->MonoNs();
  if (count_at_mono_ns_ >= 0 && now - count_at_mono_ns_ < 1'000'000'000) return count_cache_;
  int64_t sum = 0;
  std::string family = keys::Family(keys::kCounter);
  auto it = kv_->Scan(family, keys::PrefixEnd(family));
  for (; it->Valid(); it->Next()) {
    if (auto n = DecodeCounter(it->value()); n.ok()) sum += *n;
  }
  if (!it->status().ok()) return count_cache_;
  count_cache_ = sum;
  count_at_mono_ns_ = now;
  return sum;
}

void FilerService::BackoffAfterConflict(int attempt) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  int cap_us = 1000 << std::min(attempt, 6);
  std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(50, cap_us)(rng)));
}

void FilerService::MaintenanceLoop() {
  MutexLock lock(loop_mu_);
  while (!stopping_) {
    auto due = std::chrono::steady_clock::now() + opts_.maintenance_interval;
    while (!stopping_ && loop_cv_.WaitUntil(lock, due)) {
    }
    if (stopping_) break;
    lock.Unlock();
    RunMaintenance();
    lock.Lock();
  }
}

void FilerService::RunMaintenance() {
  // On a shared store one filer (the coordinator) does the store-wide chores; the others
  // would only repeat them and conflict.
  const bool chores = !kv_->shared() || cluster_->IsCoordinator();
  if (auto census = sessions_.Scan(*kv_); census.ok()) {
    session_count_ = census->sessions - census->lapsed.size();
    std::vector<uint64_t> freed;
    for (const std::string& id : census->lapsed) {
      if (!chores) break;
      if (auto s = ExpireSession(id, &freed); !s.ok()) spdlog::warn("filer: expire session {}: {}", id, s);
    }
    if (auto s = PurgeOrphansIfUnused(freed); !s.ok()) spdlog::warn("filer: purge: {}", s);
  } else {
    spdlog::warn("filer: sessions: {}", census.status());
  }
  if (chores && !InOrphanGrace()) {
    std::vector<uint64_t> orphans;
    std::string family = keys::Family(keys::kOrphan);
    auto it = kv_->Scan(family, keys::PrefixEnd(family), kOrphanScan);
    for (; it->Valid() && orphans.size() < kOrphanScan; it->Next()) {
      orphans.push_back(keys::FirstU64(it->key()));
    }
    it.reset();
    if (auto s = PurgeOrphansIfUnused(orphans); !s.ok()) spdlog::warn("filer: purge: {}", s);
  }
  if (chores) {
    if (auto s = events_.Trim(); !s.ok()) spdlog::warn("filer: event trim: {}", s);
  }
  // Journaled bytes move to blobs on one filer too (two would write the same bytes twice).
  // On a shared store the coordinator refills its queue from the store each round (one seek
  // per inode with journaled bytes: commits through other filers queue only there), and the
  // other filers keep none.
  if (kv_->shared()) {
    if (chores) {
      if (auto s = LoadJournalQueue(); !s.ok()) spdlog::warn("filer: journal queue: {}", s);
    } else {
      ClearJournalQueue();
    }
  }
  if (chores) {
    int64_t horizon_ms = NowNs() / 1'000'000 - opts_.journal_age.count();
    if (auto s = MoveJournal(horizon_ms, opts_.journal_move_bytes); !s.ok()) {
      spdlog::warn("filer: moving journaled bytes to blobs: {}", s.status());
    }
  }
}

// --- Helpers --------------------------------------------------------------------------

absl::StatusOr<InodeRecord> FilerService::LoadInode(uint64_t ino) {
  if (ino == 0) return PosixError(ENOENT, "inode 0");
  auto v = rd().Get(keys::InodeKey(ino));
  if (absl::IsNotFound(v.status())) return PosixError(ENOENT, StrCat("no inode ", ino));
  if (!v.ok()) return v.status();
  return DecodeInode(ino, *v);
}

absl::StatusOr<InodeRecord> FilerService::LoadDir(uint64_t ino) {
  ASSIGN_OR_RETURN(InodeRecord r, LoadInode(ino));
  if (!r.IsDir()) return PosixError(ENOTDIR, StrCat("inode ", ino, " is not a directory"));
  return r;
}

absl::StatusOr<std::optional<DentryValue>> FilerService::LoadDentry(uint64_t parent,
                                                                    std::string_view name) {
  auto v = rd().Get(keys::DentryKey(parent, name));
  if (absl::IsNotFound(v.status())) return std::optional<DentryValue>();
  if (!v.ok()) return v.status();
  ASSIGN_OR_RETURN(DentryValue d, DecodeDentry(*v));
  return std::optional<DentryValue>(d);
}

absl::StatusOr<bool> FilerService::DirIsEmpty(uint64_t ino) {
  std::string prefix = keys::DentryPrefix(ino);
  auto it = rd().Scan(prefix, keys::PrefixEnd(prefix), 1);
  RETURN_IF_ERROR(it->status());
  return !it->Valid();
}

void FilerService::AddEntry(Mutation& m, InodeRecord& dir, std::string_view name,
                            const InodeRecord& rec) {
  PutEntryRecords(m.batch(), dir.ino, name, rec, dir.next_cookie++);
}

void FilerService::RemoveEntry(Mutation& m, uint64_t parent, std::string_view name,
                               const DentryValue& d) {
  m.batch().Delete(keys::DentryKey(parent, name));
  m.batch().Delete(keys::DirIndexKey(parent, d.cookie));
}

void FilerService::RepointEntry(Mutation& m, uint64_t parent, std::string_view name,
                                uint64_t cookie, const InodeRecord& rec) {
  PutEntryRecords(m.batch(), parent, name, rec, cookie);
}

void FilerService::PutInode(Mutation& m, InodeRecord& rec) { PutInodeRecord(m.batch(), rec); }

absl::Status FilerService::DropOrOrphan(Mutation& m, InodeRecord& rec) {
  ASSIGN_OR_RETURN(bool open, sessions_.IsOpen(rd(), rec.ino));
  if (open) {
    m.batch().Put(keys::OrphanKey(rec.ino), EncodeOrphan(NowNs()));
    PutInode(m, rec);
    return absl::OkStatus();
  }
  return PurgeInode(m, rec, false);  // it had a name until now: no orphan mark
}

absl::Status FilerService::PurgeInode(Mutation& m, const InodeRecord& rec, bool marked) {
  WriteBatch& b = m.batch();
  // Point deletes of what a scan finds, not range deletes: RocksDB range tombstones are cheap
  // to write but slow down reads when there are millions of them (one per unlink).
  auto delete_family = [&](const std::string& prefix,
                           const std::function<absl::Status(const KvIterator&)>& each) {
    auto it = rd().Scan(prefix, keys::PrefixEnd(prefix));
    for (; it->Valid(); it->Next()) {
      if (each) RETURN_IF_ERROR(each(*it));
      b.Delete(it->key());
    }
    return it->status();
  };
  std::map<std::string, uint64_t> blobs;
  if (rec.chunk_count > 0) {
    RETURN_IF_ERROR(delete_family(keys::ChunkPrefix(rec.ino), [&](const KvIterator& it) {
      ASSIGN_OR_RETURN(Chunk c, DecodeChunk(keys::SecondU64(it.key()), it.value()));
      if (!c.fid().empty()) blobs.emplace(c.fid(), c.blob_size());
      return absl::OkStatus();
    }));
  }
  if (rec.journal_count > 0) RETURN_IF_ERROR(delete_family(keys::JournalPrefix(rec.ino), nullptr));
  // The count, when kept, saves a scan per unlink (almost every file has no xattrs).
  if (!rec.xattrs_counted || rec.xattr_count > 0) {
    RETURN_IF_ERROR(delete_family(keys::XattrPrefix(rec.ino), nullptr));
  }
  // A purged directory is empty (rmdir checked, under its lock), so D and K need nothing.
  if (rec.inline_size > 0) b.Delete(keys::InlineKey(rec.ino));
  if (marked) b.Delete(keys::OrphanKey(rec.ino));
  b.Delete(keys::InodeKey(rec.ino));
  m.AdjustInodes(-1);
  m.Collect(blobs, rec.ino);
  return absl::OkStatus();
}

absl::Status FilerService::PurgeOrphanIfUnused(uint64_t ino, std::vector<FreedBlob>* freed) {
  if (InOrphanGrace()) {
    // Mounts may still be re-announcing opens after a restart; the sweep after the grace
    // period catches this inode.
    return absl::OkStatus();
  }
  return Transact([&] { return PurgeOrphanOnce(ino, freed); });
}

absl::Status FilerService::PurgeOrphansIfUnused(const std::vector<uint64_t>& inos,
                                                std::vector<FreedBlob>* freed) {
  absl::Status first;
  for (uint64_t ino : inos) {
    absl::Status s = PurgeOrphanIfUnused(ino, freed);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status FilerService::PurgeOrphanOnce(uint64_t ino, std::vector<FreedBlob>* freed) {
  auto guard = locks_.Lock({ino});
  // The mark first: one read, and most inodes released are not orphans.
  auto mark = rd().Get(keys::OrphanKey(ino));
  if (absl::IsNotFound(mark.status())) return absl::OkStatus();
  RETURN_IF_ERROR(mark.status());
  ASSIGN_OR_RETURN(bool open, sessions_.IsOpen(rd(), ino));
  if (open) return absl::OkStatus();
  Mutation m(this, guard);
  auto rec = LoadInode(ino);
  if (rec.ok() && rec->nlink == 0) {
    RETURN_IF_ERROR(PurgeInode(m, *rec, true));
  } else if (rec.ok() || ErrnoOf(rec.status()) == ENOENT) {
    m.batch().Delete(keys::OrphanKey(ino));  // stale mark
  } else {
    return rec.status();
  }
  RETURN_IF_ERROR(m.Commit());
  if (freed != nullptr) {
    for (FreedBlob& b : m.FreedOf(ino)) freed->push_back(std::move(b));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FilerService::IsWithin(uint64_t dir, uint64_t ancestor) {
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    if (dir == ancestor) return true;
    if (dir == keys::kRootIno || dir == 0) return false;
    ASSIGN_OR_RETURN(InodeRecord r, LoadInode(dir));
    dir = r.parent;
  }
  return absl::DataLossError("directory parent chain too deep (cycle?)");
}

}  // namespace kelp::filer
