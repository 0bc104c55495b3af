#include <sys/statvfs.h>

#include <atomic>
#include <cerrno>
#include <chrono>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include "absl/base/thread_annotations.h"
#include "filer/store/keys.h"
#include "filer/store/kv_store.h"
#include "filer/store/rocksdb_crc32c.h"
#include "filer/store/zeroed_wal.h"
#include "shared/log.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsNotFound()) return absl::NotFoundError(StrCat(what, ": not found"));
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(StrCat(what, ": ", s.ToString()));
  return absl::InternalError(StrCat(what, ": ", s.ToString()));
}

rocksdb::Slice S(std::string_view v) { return rocksdb::Slice(v.data(), v.size()); }

class RocksIterator : public KvIterator {
 public:
  RocksIterator(rocksdb::DB* db, const rocksdb::Snapshot* snap, std::string begin, std::string end)
      : db_(db), snap_(snap), begin_(std::move(begin)), end_(std::move(end)) {
    rocksdb::ReadOptions ro;
    ro.snapshot = snap_;
    if (!end_.empty()) {
      upper_ = rocksdb::Slice(end_);
      ro.iterate_upper_bound = &upper_;
    }
    it_.reset(db_->NewIterator(ro));
    it_->Seek(S(begin_));
  }
  ~RocksIterator() override {
    it_.reset();
    db_->ReleaseSnapshot(snap_);
  }
  bool Valid() const override { return it_->Valid(); }
  void Next() override { it_->Next(); }
  std::string_view key() const override { return it_->key().ToStringView(); }
  std::string_view value() const override { return it_->value().ToStringView(); }
  absl::Status status() const override { return FromRocks(it_->status(), "scan"); }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snap_;
  std::string begin_, end_;
  rocksdb::Slice upper_;
  std::unique_ptr<rocksdb::Iterator> it_;
};

class RocksKvStore : public KvStore {
 public:
  RocksKvStore(std::unique_ptr<rocksdb::Env> env, std::unique_ptr<rocksdb::DB> db,
               std::shared_ptr<rocksdb::Statistics> stats, std::string dir, uint64_t min_free_bytes)
      : env_(std::move(env)),
        db_(std::move(db)),
        stats_(std::move(stats)),
        dir_(std::move(dir)),
        min_free_bytes_(min_free_bytes),
        wal_syncs_(MetricsRegistry::Default().GetCounter(
            "kelp_filer_wal_syncs_total", "WAL syncs (fsync, synced writes); a sync with nothing new is skipped")) {
    // Group commit: concurrent synced writes share one sync of the WAL (Sync), so this counts
    // kelp_filer_wal_syncs_total (more only while RocksDB switches to a new WAL file).
    wal_fsyncs_callback_ = MetricsRegistry::Default().AddCallback(
        "kelp_filer_wal_file_syncs", "fsyncs of the WAL file RocksDB made (concurrent synced writes share one)",
        [s = stats_] { return static_cast<double>(s->getTickerCount(rocksdb::WAL_FILE_SYNCED)); });
  }
  ~RocksKvStore() override {
    MetricsRegistry::Default().RemoveCallback(wal_fsyncs_callback_);
    if (db_) {
      db_->FlushWAL(true);
      db_->Close();
    }
  }

  absl::StatusOr<std::string> Get(std::string_view key) override {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), S(key), &value);
    if (s.IsNotFound()) return absl::NotFoundError("key not found");
    if (!s.ok()) return FromRocks(s, "get");
    return value;
  }

  absl::Status Write(const WriteBatch& batch, bool sync) override {
    if (min_free_bytes_ > 0 && !batch.may_use_reserve() && !DiskHasRoom()) {
      bool adds = false;
      for (const auto& op : batch.ops()) adds |= op.kind == WriteBatch::Op::kPut;
      if (adds) {
        return PosixError(ENOSPC, StrCat("the filer's store has less than ", min_free_bytes_ >> 20,
                                         " MiB free on its disk"));
      }
    }
    // A batch with Require checks runs alone, so no other write slips between its checks and
    // its own write; plain batches share the lock (RocksDB groups them itself).
    SyncFollows follows(sync);
    absl::Status s;
    if (batch.has_requires()) {
      WriterLock exclusive(require_mu_);
      s = WriteLocked(batch);
    } else {
      ReaderLock shared(require_mu_);
      s = WriteLocked(batch);
    }
    // A synced write is a write and then a Sync, not RocksDB's synced write: that one holds
    // the write queue across its fsync, so every write behind it, synced or not, waited a
    // device flush (sysbench rndrw, 16 threads: unsynced writes 120-210 us mean).
    if (!s.ok() || !sync) return s;
    return Sync();
  }

  // Needs require_mu_, exclusive when the batch has Require checks. Not synced.
  absl::Status WriteLocked(const WriteBatch& batch) ABSL_SHARED_LOCKS_REQUIRED(require_mu_) {
    rocksdb::WriteBatch wb;
    for (const auto& op : batch.ops()) {
      switch (op.kind) {
        case WriteBatch::Op::kPut: wb.Put(S(op.key), S(op.value)); break;
        case WriteBatch::Op::kDelete: wb.Delete(S(op.key)); break;
        case WriteBatch::Op::kDeleteRange:
          if (!op.value.empty() && op.key >= op.value) break;
          // A range tombstone needs an end, and a start the memtable keeps no insert position
          // for (keys::InsertHintPrefix: RocksDB 7.8 takes the position of a run of point keys
          // for the range table too, and corrupts it). Otherwise the range goes key by key:
          // what the store holds and what this batch put there before.
          if (!op.value.empty() && keys::InsertHintPrefix(op.key) == 0) {
            wb.DeleteRange(S(op.key), S(op.value));
            break;
          }
          {
            auto in_range = [&](std::string_view k) {
              return k >= op.key && (op.value.empty() || k < op.value);
            };
            for (const auto& before : batch.ops()) {
              if (&before == &op) break;
              if (before.kind == WriteBatch::Op::kPut && in_range(before.key))
                wb.Delete(S(before.key));
            }
            auto it = std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(rocksdb::ReadOptions()));
            for (it->Seek(S(op.key));
                 it->Valid() && in_range(std::string_view(it->key().data(), it->key().size()));
                 it->Next()) {
              wb.Delete(it->key());
            }
            if (!it->status().ok()) return FromRocks(it->status(), "scan");
          }
          break;
        case WriteBatch::Op::kRequire: {
          std::string ignored;
          rocksdb::Status g = db_->Get(rocksdb::ReadOptions(), S(op.key), &ignored);
          if (g.IsNotFound()) return MissingKeyError(op.key);
          if (!g.ok()) return FromRocks(g, "get");
          break;
        }
      }
    }
    rocksdb::WriteOptions wo;
    rocksdb::Status s = db_->Write(wo, &wb);
    if (!s.ok() && min_free_bytes_ > 0 && DiskHasRoom()) {
      // A background flush that met a full disk stops every write until Resume(); once room
      // is back, resume and try again.
      if (db_->Resume().ok()) s = db_->Write(wo, &wb);
    }
    return FromRocks(s, "write");
  }

  using KvStore::Scan;
  // RocksDB iterates lazily, so limit_hint needs no handling.
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                   size_t) override {
    return std::make_unique<RocksIterator>(db_.get(), db_->GetSnapshot(), std::string(begin), std::string(end));
  }

  // Free when nothing was written since the last sync covered it: an fsync of a file that did
  // not change (sysbench fsyncs every file it has open) costs no device flush. Group commit:
  // one sync runs at a time, off RocksDB's write queue; the callers that come while it runs
  // wait for it and, when it did not cover their writes, share the next one.
  absl::Status Sync() override {
    const rocksdb::SequenceNumber want = db_->GetLatestSequenceNumber();
    if (want <= synced_.load()) return absl::OkStatus();
    rocksdb::SequenceNumber latest = 0;
    {
      MutexLock lock(sync_mu_);
      while (synced_.load() < want && syncing_) sync_done_.Wait(lock);
      if (synced_.load() >= want) return absl::OkStatus();
      syncing_ = true;
      // Every write published by now is in the WAL file: the sync below covers it.
      latest = db_->GetLatestSequenceNumber();
    }
    rocksdb::Status s = db_->FlushWAL(true);
    wal_syncs_->Inc();
    {
      MutexLock lock(sync_mu_);
      syncing_ = false;
      if (s.ok()) MarkSynced(latest);
    }
    sync_done_.NotifyAll();
    return FromRocks(s, "sync WAL");
  }

  std::string_view kind() const override { return "rocksdb"; }

  uint64_t ApproximateSize() override {
    uint64_t v = 0;
    db_->GetIntProperty("rocksdb.total-sst-files-size", &v);
    uint64_t mem = 0;
    db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
    return v + mem;
  }

 private:
  // Whether the store's file system has min_free_bytes_ free; statvfs at most every 50 ms.
  bool DiskHasRoom() {
    int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    if (now - free_checked_ms_.load() >= 50) {
      free_checked_ms_ = now;
      struct statvfs st;
      if (statvfs(dir_.c_str(), &st) == 0) {
        has_room_ = static_cast<uint64_t>(st.f_bavail) * st.f_frsize >= min_free_bytes_;
      }
    }
    return has_room_.load();
  }

  void MarkSynced(rocksdb::SequenceNumber seq) {
    rocksdb::SequenceNumber cur = synced_.load();
    while (cur < seq && !synced_.compare_exchange_weak(cur, seq)) {
    }
  }

  // The Env the DB was opened with (null: RocksDB's default); outlives db_.
  std::unique_ptr<rocksdb::Env> env_;
  std::unique_ptr<rocksdb::DB> db_;
  SharedMutex require_mu_;
  std::shared_ptr<rocksdb::Statistics> stats_;
  const std::string dir_;
  const uint64_t min_free_bytes_;
  std::atomic<int64_t> free_checked_ms_{-1000};
  std::atomic<bool> has_room_{true};
  int wal_fsyncs_callback_ = -1;
  // Every write up to this sequence number is in the synced WAL.
  std::atomic<rocksdb::SequenceNumber> synced_{0};
  Mutex sync_mu_;
  CondVar sync_done_;
  bool syncing_ ABSL_GUARDED_BY(sync_mu_) = false;  // a FlushWAL(true) runs
  Counter* const wal_syncs_;
};

// The runs of keys the memtable keeps an insert position for (keys::InsertHintPrefix).
class InsertHintPrefix : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "kelp.InsertHintPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(),
                          keys::InsertHintPrefix(std::string_view(key.data(), key.size())));
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return keys::InsertHintPrefix(std::string_view(key.data(), key.size())) > 0;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvStore>> OpenRocksKvStore(const std::string& dir,
                                                          const RocksKvOptions& options) {
  rocksdb::Options opts;
  std::unique_ptr<rocksdb::Env> env;
  if (options.wal_zero_ahead_mb > 0) {
    ZeroedWalOptions z;
    z.ahead_bytes = uint64_t{options.wal_zero_ahead_mb} << 20;
    env = rocksdb::NewCompositeEnv(NewZeroedWalFileSystem(rocksdb::FileSystem::Default(), z));
    opts.env = env.get();
  }
  opts.create_if_missing = true;
  // A create's eight keys went into the memtable with a search each from the top of its skip
  // list (a quarter of the filer's CPU in a create); with a remembered position per run of
  // keys (keys::InsertHintPrefix), most go in next to the last of their run.
  opts.memtable_insert_with_hint_prefix_extractor = std::make_shared<InsertHintPrefix>();
  // Debian's librocksdb is built with DEBUG as the default level: a line in LOG for every
  // FlushWAL(true), i.e. every WAL sync (a LOG that grew without bound, and a line formatted
  // between each synced commit's WAL append and its fdatasync). Flushes, compactions and the
  // periodic stats are INFO. The LOG is also rotated and bounded.
  opts.info_log_level = rocksdb::InfoLogLevel::INFO_LEVEL;
  opts.max_log_file_size = 16 << 20;
  opts.keep_log_file_num = 4;
  opts.IncreaseParallelism(2);
  opts.OptimizeLevelStyleCompaction(options.memtable_budget_bytes);
  if (options.blob_min_bytes > 0) {
    opts.enable_blob_files = true;
    opts.min_blob_size = options.blob_min_bytes;
    // Compactions relocate the live values of the oldest quarter of the blob files, so a file
    // whose values were mostly deleted (moved journal bytes) goes away.
    opts.enable_blob_garbage_collection = true;
  }
  // With sync=false writes still go to the WAL; manual_wal_flush=false means each write
  // reaches the OS, so a process crash loses nothing acknowledged. Under testing_power_cut
  // they stay in RocksDB's WAL buffer: a synced write flushes the buffer before its fsync
  // (WritableFileWriter::Sync flushes first) and Sync() is FlushWAL(true), so what a synced
  // write or Sync() returned for is on disk, and only what no sync covered dies with the
  // process.
  opts.manual_wal_flush = options.testing_power_cut;
  // Tickers only (no timers, no histograms): what kelp_filer_wal_file_syncs reads.
  opts.statistics = rocksdb::CreateDBStatistics();
  opts.statistics->set_stats_level(rocksdb::StatsLevel::kExceptHistogramOrTimers);
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10, false));
  table.whole_key_filtering = true;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  // Index and filter blocks of every open table stay in the heap (RocksDB's default) rather
  // than competing with data blocks in the cache.
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  spdlog::debug("filer store: RocksDB at {}, CRC32C by {}", dir, RocksCrc32cImplementation());
  rocksdb::Status s = rocksdb::DB::Open(opts, dir, &raw);
  if (!s.ok()) return absl::UnavailableError(StrCat("open RocksDB at ", dir, ": ", s.ToString()));
  return std::unique_ptr<KvStore>(new RocksKvStore(std::move(env), std::unique_ptr<rocksdb::DB>(raw),
                                                   opts.statistics, dir, options.min_free_bytes));
}

}  // namespace kelp::filer
