// The filer's persistence boundary: an ordered key-value store with atomic write batches.
// The namespace, the cluster sequences, the GC queue and the event log all live on top of it
// (key layout: docs/filer-keys.md). RocksDB is the embedded default (rocksdb_kv_store.h); an
// in-memory implementation (memory_kv_store.h) serves unit tests; a distributed database can
// implement the same interface later.
//
// Thread-safety: every method may be called from any thread concurrently. A WriteBatch is
// applied atomically: readers see all of it or none of it. Atomicity across a read and a
// later write is the caller's business (the filer uses striped locks).
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
  // Deletes every key in [begin, end).
  void DeleteRange(std::string_view begin, std::string_view end) {
    ops_.push_back({Op::kDeleteRange, std::string(begin), std::string(end)});
  }
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  void Clear() { ops_.clear(); }

  struct Op {
    enum Kind { kPut, kDelete, kDeleteRange } kind;
    std::string key;
    std::string value;  // kPut: the value; kDeleteRange: the end key
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// A forward iterator over a key range, from a consistent snapshot taken at creation.
class KvIterator {
 public:
  virtual ~KvIterator() = default;
  virtual bool Valid() const = 0;
  virtual void Next() = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual absl::Status status() const = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // NotFound when absent.
  virtual absl::StatusOr<std::string> Get(std::string_view key) = 0;
  // sync: the batch is durable (WAL fsynced) before this returns. Without it the batch is in
  // the WAL (survives a process crash) but may be lost on power loss.
  virtual absl::Status Write(const WriteBatch& batch, bool sync) = 0;
  // Iterates keys in [begin, end) in byte order; end empty = to the end of the keyspace.
  // limit_hint > 0 says the caller reads at most that many entries, so an implementation that
  // materialises its snapshot (the memory store) copies no more; 0 = unbounded. Reading past
  // the hint is allowed but may end early.
  virtual std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end,
                                           size_t limit_hint) = 0;
  std::unique_ptr<KvIterator> Scan(std::string_view begin, std::string_view end) {
    return Scan(begin, end, 0);
  }
  // Makes every earlier write durable.
  virtual absl::Status Sync() = 0;
  // Approximate bytes used on disk (for statfs and metrics).
  virtual uint64_t ApproximateSize() = 0;

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
  // Writes that add data are refused with ENOSPC once the store's file system has less than
  // this many bytes free (default 16 MiB), so RocksDB never meets a full disk (Debian's build aborts on a
  // failed WAL write); deletes still go through, so space can be freed.
  uint64_t min_free_bytes = 16ULL << 20;
};

// Opens (creating if needed) a RocksDB store in dir.
absl::StatusOr<std::unique_ptr<KvStore>> OpenRocksKvStore(const std::string& dir,
                                                          const RocksKvOptions& options = {});
std::unique_ptr<KvStore> NewMemoryKvStore();

}  // namespace kelp::filer
