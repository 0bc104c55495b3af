// The filer's persistence boundary: an ordered key-value store with atomic write batches and
// serializable read-write transactions. The namespace, the cluster sequences, the GC queue,
// sessions and the event log all live on top of it (key layout: docs/filer-keys.md).
// Backends (docs/filer-stores.md): RocksDB, the embedded default (one process opens it);
// PostgreSQL and what speaks its protocol (CockroachDB, YugabyteDB), which several filers
// share; an in-memory map for unit tests, optionally behaving like a shared store.
//
// Thread-safety: every KvStore method may be called from any thread concurrently. A WriteBatch
// is applied atomically: readers see all of it or none of it. A KvTxn belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp::filer {

class WriteBatch {
 public:
  void Put(std::string_view key, std::string_view value) { ops_.push_back({Op::kPut, std::string(key), std::string(value)}); }
  void Delete(std::string_view key) { ops_.push_back({Op::kDelete, std::string(key), {}}); }
  // Deletes every key in [begin, end); end empty = to the end of the keyspace.
  void DeleteRange(std::string_view begin, std::string_view end) {
    ops_.push_back({Op::kDeleteRange, std::string(begin), std::string(end)});
  }
  // The batch applies only if key exists when it is applied; otherwise nothing of it does and
  // the write answers MissingKeyError(key). Atomic with the batch on every backend.
  void Require(std::string_view key) { ops_.push_back({Op::kRequire, std::string(key), {}}); }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  void Clear() { ops_.clear(); }
  bool has_requires() const;
  // Marks the batch as bookkeeping that reading and keeping a mount attached need (sessions,
  // their renewals, open counts): a store that refuses writes inside its disk reserve
  // (RocksKvOptions::min_free_bytes) still takes it. Small by nature; never for data.
  void set_may_use_reserve() { may_use_reserve_ = true; }
  bool may_use_reserve() const { return may_use_reserve_; }

  struct Op {
    enum Kind { kPut, kDelete, kDeleteRange, kRequire } kind;
    std::string key;
    std::string value;  // kPut: the value; kDeleteRange: the end key
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
  bool may_use_reserve_ = false;
};

// A forward iterator over a key range. Outside a transaction it reads a consistent snapshot
// taken at creation; inside one it reads the transaction's state.
class KvIterator {
 public:
  virtual ~KvIterator() = default;
  virtual bool Valid() const = 0;
  virtual void Next() = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual absl::Status status() const = 0;
};

// Point reads and range scans: what a KvStore and a KvTxn have in common.
class KvReader {
 public:
  virtual ~KvReader() = default;
  // NotFound when absent.
  virtual absl::StatusOr<std::string> Get(std::string_view key) = 0;
  // Iterates keys in [begin, end) in byte order; end empty = to the end of the keyspace.
  // limit_hint > 0 says the caller reads at most that many entries, so an implementation that
  // materialises its results (memory, PostgreSQL) fetches no more; 0 = unbounded. Reading past
  // the hint is allowed but may end early.
  virtual std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                           size_t limit_hint) = 0;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end) {
    return Scan(begin, end, 0);
  }
  // Number of keys in [begin, end). Inside a transaction it depends on the whole range: a key
  // added there by someone else makes the transaction conflict.
  virtual absl::StatusOr<uint64_t> Count(std::string_view begin, std::string_view end);
};

// A read-write transaction, serializable: Commit applies the batch only if nothing the
// transaction read (keys, ranges, absences) was changed by someone else since; otherwise it
// answers a conflict (IsConflict) and the caller starts over in a new transaction, reading
// again. Reads do not see the transaction's own batch (it is only handed over at Commit).
// Any read may also answer a conflict. Destroying a transaction without Commit rolls it back.
// After Commit, reads go to the store as it is (no transaction).
//
// One thread uses a transaction; iterators it returned must be destroyed before Commit.
class KvTxn : public KvReader {
 public:
  using KvReader::Scan;
  // sync: durable before this returns (as KvStore::Write).
  virtual absl::Status Commit(const WriteBatch& batch, bool sync) = 0;
};

class KvStore : public KvReader {
 public:
  using KvReader::Scan;
  // sync: the batch is durable (WAL fsynced) before this returns. Without it the batch is in
  // the WAL (survives a process crash) but may be lost on power loss.
  virtual absl::Status Write(const WriteBatch& batch, bool sync) = 0;
  // Makes every earlier write durable.
  virtual absl::Status Sync() = 0;
  // Approximate bytes used on disk (for statfs and metrics).
  virtual uint64_t ApproximateSize() = 0;

  // A new transaction. The default one (stores only one process opens) reads the store as it
  // is and commits with Write: the filer's own locks already order its read-modify-writes.
  virtual std::unique_ptr<KvTxn> Begin();
  // True when other processes may change the store at any time (several filers share it):
  // then the filer relies on transactions, not on its locks, for read-check-writes, and hands
  // out counters in ranges taken inside transactions.
  virtual bool shared() const { return false; }
  // "rocksdb", "postgres", "cockroachdb", "yugabytedb", "memory".
  virtual std::string_view kind() const = 0;

  absl::Status Put(std::string_view key, std::string_view value, bool sync = false) {
    WriteBatch b;
    b.Put(key, value);
    return Write(b, sync);
  }
  absl::Status Delete(std::string_view key, bool sync = false) {
    WriteBatch b;
    b.Delete(key);
    return Write(b, sync);
  }
};

// Held by a thread whose writes a sync will follow at once (Write with sync, which holds one):
// a store may start each of them towards the device as it takes it, so that the sync finds
// the bytes written and only has the device's cache to flush (RocksDB over the zeroed WAL
// does, filer/store/zeroed_wal.h). A hint: nothing else changes. Nests; on=false leaves the
// thread as it was.
class SyncFollows {
 public:
  explicit SyncFollows(bool on = true) : prev_(active_) { active_ = prev_ || on; }
  ~SyncFollows() { active_ = prev_; }
  SyncFollows(const SyncFollows&) = delete;
  SyncFollows& operator=(const SyncFollows&) = delete;
  static bool active() { return active_; }

 private:
  static inline thread_local bool active_ = false;
  const bool prev_;
};

// A transaction lost to a concurrent change (SQLSTATE 40001/40P01, a failed validation):
// ABORTED. Retrying the whole read-check-write is the fix.
absl::Status ConflictError(std::string_view message);
bool IsConflict(const absl::Status& s);
// A WriteBatch::Require'd key was absent: FAILED_PRECONDITION naming the key.
absl::Status MissingKeyError(std::string_view key);
// The key a MissingKeyError names; nullopt for any other status.
std::optional<std::string> MissingKeyOf(const absl::Status& s);

struct RocksKvOptions {
  // LRU cache of uncompressed blocks, in bytes. Random lookups in a large namespace are
  // served from it. Default: 256 MiB.
  size_t block_cache_bytes = 256ULL << 20;
  // Memory for memtables (RocksDB's OptimizeLevelStyleCompaction budget), in bytes.
  // Default: 256 MiB.
  size_t memtable_budget_bytes = 256ULL << 20;
  // Testing only (-testing.powerCut): RocksDB keeps unsynced WAL records in this process's
  // buffer (manual_wal_flush) instead of handing each to the OS, so a kill -9 loses what a
  // power cut would: every write not covered by a synced write or Sync(). Default: false.
  bool testing_power_cut = false;
  // The WAL is written over zeros laid down this many MiB ahead of it (-store.walZeroAheadMB),
  // so a synced write overwrites blocks that exist, with no allocation or size change to sync
  // (filer/store/zeroed_wal.h); 0 appends to the WAL as RocksDB does. Default: 4.
  uint32_t wal_zero_ahead_mb = 4;
  // Values of at least this many bytes (journaled chunk bytes, inline data) are kept in blob
  // files beside the tables (RocksDB's integrated BlobDB, -store.blobMinBytes): a memtable
  // flush writes them once and compactions move only their keys. Journaled bytes live ~10 s
  // (docs/filer-keys.md, "J"); rewriting them through every level was a third of the filer's
  // CPU under sysbench. 0 keeps every value in the tables. Default: 4096.
  uint32_t blob_min_bytes = 4096;
  // Writes that add data are refused with ENOSPC once the store's file system has less than
  // this many bytes free (default 16 MiB), so RocksDB never meets a full disk (Debian's build aborts on a
  // failed WAL write); deletes still go through, so space can be freed, and so does
  // bookkeeping (WriteBatch::may_use_reserve: sessions and opens), so files stay readable.
  uint64_t min_free_bytes = 16ULL << 20;
};

// Opens (creating if needed) a RocksDB store in dir.
absl::StatusOr<std::unique_ptr<KvStore>> OpenRocksKvStore(const std::string& dir,
                                                          const RocksKvOptions& options = {});

// shared = true: the store behaves like one several processes write (shared() is true and
// transactions validate what they read at Commit, answering conflicts), so unit tests can run
// several filers over one store.
std::unique_ptr<KvStore> NewMemoryKvStore(bool shared = false);

}  // namespace kelp::filer
