// The disk tiers of the read cache: per tier, an index of entry files and an eviction policy,
// plus the byte accounting that keeps `du -s` of the directory within the capacity at all times
// (docs/cache-format.md, "Capacity accounting"). Every failure is absorbed here: a read that
// cannot be served is a miss, an insert that cannot be written is skipped, and both are counted.
//
// Thread-safety: Read and Insert may be called from any thread concurrently (FUSE workers).
// Close is called once, by the owner, and waits for calls in flight; later calls are no-ops.
// Locking: mu_ guards the indexes, policies and counters below. It is a leaf lock and is never
// held across file I/O: an insert reserves bytes under mu_, writes with no lock, then publishes
// the entry under mu_; an eviction unlinks its victims after dropping mu_, and their bytes stay
// counted until the unlink is done. A thread of the cache's own deletes forgotten entries'
// files (Forget) the same way, until Close.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "mount/cache/cache_dir.h"
#include "mount/cache/cache_stats.h"
#include "mount/cache/eviction_policy.h"
#include "shared/mutex.h"

namespace kelp::mount::cache {

// A cache block: bytes [block_offset, block_offset + len) of blob fid.
struct BlockId {
  std::string_view fid;
  uint64_t blob_size = 0;
  uint64_t block_offset = 0;
  uint64_t key = 0;  // BlockKey(fid, block_offset)
};

class DiskCache {
 public:
  // Entry files kept open between reads (saves an open and a close per hit): a quarter of the
  // process's descriptor limit, between 64 and 8,192.
  static size_t MaxOpenFiles();

  struct Config {
    std::string dir;
    uint64_t capacity_bytes = 0;
    std::array<uint32_t, kNumTiers> shares_percent = {20, 30, 50};
    TierLayout layout;
    EvictionKind eviction = EvictionKind::kS3Fifo;
    uint32_t backoff_ms = 1000;
    std::function<void()> testing_before_delete;  // CacheOptions::testing_before_delete
    uint32_t forget_pause_ms = 20;                // CacheOptions::forget_pause_ms
  };

  // Opens or creates the directory and loads what it holds. nullptr (with a warning logged)
  // when the directory is unusable: the cache then runs without disk tiers.
  static std::unique_ptr<DiskCache> Open(const Config& config, CacheCounters* counters);
  ~DiskCache();  // Close()

  // Copies [offset, offset + len) of the block into dst if it is cached and verifies. A bad
  // entry is dropped and counted. Does not count hits or misses (the caller does).
  bool Read(Tier tier, const BlockId& block, uint64_t offset, size_t len, char* dst);
  // Writes the block (data is all of it) unless it is cached or being written already, evicting
  // to make room. False when skipped.
  bool Insert(Tier tier, const BlockId& block, std::string_view data);
  // Whether entries holding `bytes` of data would fit now with nothing evicted and a sixteenth
  // of the capacity still free after them.
  bool HasRoom(uint64_t bytes) const;
  // Drops the published entries of these blocks (of one blob), counted as forgotten; entries
  // being written are left alone. Their files go in the background at a gentle pace (a deleted
  // 1 GiB file's 4,000 entries deleted at once, each a truncation and the disk's discard, slowed
  // the program that ran next), at full speed while the cache needs their room; their bytes
  // count as free meanwhile, as evicted ones' do.
  void Forget(Tier tier, const std::vector<BlockId>& blocks);
  // Waits for calls in flight and the deletion of forgotten entries, then saves the index hint
  // (evicting if it would not fit).
  void Close();

  // Fills disk gauges: entries, bytes and shares per tier, meta bytes, capacity.
  void FillStats(CacheStats* stats) const;

 private:
  // An entry file kept open for reads, shared by concurrent readers; closed by the last one.
  struct OpenFile {
    explicit OpenFile(int f) : fd(f) {}
    ~OpenFile();
    OpenFile(const OpenFile&) = delete;
    OpenFile& operator=(const OpenFile&) = delete;
    const int fd;
  };
  struct Entry {
    std::string fid;
    uint64_t blob_size = 0;
    uint64_t block_offset = 0;
    uint32_t data_len = 0;
    uint64_t id = 0;
    uint64_t disk_bytes = 0;
    bool pending = true;  // being written: neither readable nor evictable
    // Checksums of the data pages, kept in memory (0.2% of the data) so a read is one pread
    // with no header to fetch and verify.
    std::vector<uint64_t> page_sums;
    std::shared_ptr<OpenFile> file;  // set while among the open_files_ ring
    // Where a sequential reader of this block would read next. A hit there continues a scan
    // (read-ahead inserted the block, the reader walks through it) and is not a reuse, so it
    // does not count for the eviction policy.
    uint32_t next_sequential = 0;
  };
  struct TierState {
    absl::flat_hash_map<uint64_t, Entry> index;  // by BlockKey
    std::unique_ptr<EvictionPolicy> policy;
    uint64_t live_bytes = 0;     // disk bytes of published entries
    uint64_t writing_bytes = 0;  // reserved by this tier's writes in flight
    uint64_t usage() const { return live_bytes + writing_bytes; }
    uint64_t dir_bytes = 0;  // the tier directory itself, as last measured
  };
  struct Victim {
    Tier tier;
    uint64_t id;
    uint64_t bytes;
    std::shared_ptr<OpenFile> file;  // released before the unlink, outside the lock
    bool reusable = true;            // false: a file that failed a read is deleted, not reused
  };
  struct Spare {
    Tier tier;
    uint64_t id;
    uint64_t bytes;  // on disk
  };
  struct OpenFileSlot {
    int tier;
    uint64_t key, id;
  };
  // Counts a call in flight so that Close can wait for it.
  class OpGuard;

  DiskCache(const Config& config, CacheCounters* counters, std::unique_ptr<CacheDir> dir);
  void Load(ScanResult scan);

  uint64_t DataBudgetLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t GuaranteeLocked(int tier) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t UsedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether need more bytes fit in budget, counting bytes being deleted as free (their files
  // are gone a few system calls later) and spares' (the next inserts write over them, and
  // TrimSparesLocked drops those that would keep the cache past its capacity).
  bool FitsLocked(uint64_t need, uint64_t budget) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return UsedLocked() - deleting_bytes_ - spare_bytes_ + need <= budget;
  }
  int VictimTierLocked(int for_tier, uint64_t need) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts until used + need fits in budget (or nothing is left to evict), appending victims.
  void EvictLocked(int for_tier, uint64_t need, uint64_t budget, std::vector<Victim>* victims)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes victims' files (no lock held), then stops counting their bytes. Up to
  // MaxSpares() of them, no longer open anywhere, are kept as spares instead (their bytes move
  // to spare_bytes_).
  void Unlink(std::vector<Victim> victims) ABSL_LOCKS_EXCLUDED(mu_);
  // forget_thread_: makes forgotten_ spares (or deletes them past MaxSpares()) a batch at a
  // time until Close.
  void ForgetLoop() ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr size_t kForgetBatch = 16;
  // Takes published entry `it` of tier t out of the index (its bytes leave live_bytes) and
  // returns it as a victim; the caller counts its bytes as deleting if it unlinks it.
  Victim RemoveLocked(int t, absl::flat_hash_map<uint64_t, Entry>::iterator it, bool reusable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes spares off spares_ (their bytes into deleting_bytes_) while the files on disk pass
  // the budget, not counting writes in flight, for the caller to unlink with UnlinkSpares.
  std::vector<Spare> TrimSparesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnlinkSpares(const std::vector<Spare>& spares) ABSL_LOCKS_EXCLUDED(mu_);
  // Reserves need bytes for a write, evicting as needed. False if it cannot be had.
  bool Reserve(int tier, uint64_t need) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets entry `key` if it is still file `id` (false if it is not); with unlink, deletes the
  // file too.
  bool Drop(int tier, uint64_t key, uint64_t id, bool unlink) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteWriteError(const absl::Status& status);
  // Keeps file open for entry (tier, key, id) if it still exists, closing the oldest kept file
  // beyond MaxOpenFiles().
  void KeepOpen(int tier, uint64_t key, uint64_t id, std::shared_ptr<OpenFile> file)
      ABSL_LOCKS_EXCLUDED(mu_);

  const Config config_;
  CacheCounters* const counters_;
  const std::unique_ptr<CacheDir> dir_;
  const uint64_t fs_block_;

  std::atomic<int> inflight_{0};
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> backoff_until_ns_{0};  // steady clock; no disk writes before it

  mutable Mutex mu_;
  std::array<TierState, kNumTiers> tiers_ ABSL_GUARDED_BY(mu_);
  uint64_t root_meta_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // root dir, KELPCACHE, LOCK, index
  uint64_t deleting_bytes_ ABSL_GUARDED_BY(mu_) = 0;   // victims not unlinked yet
  uint64_t leaked_bytes_ ABSL_GUARDED_BY(mu_) = 0;     // files we failed to delete
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Entries whose file is kept open, oldest first (slots of entries gone since are skipped).
  std::deque<OpenFileSlot> open_files_ ABSL_GUARDED_BY(mu_);
  // Evicted and forgotten entries' files (SpareFileName), blocks and all, that the next inserts
  // rename into place and write over rather than create files: creating and deleting a file
  // per block made ext4 without a journal search past every recently freed inode on each
  // create, and emptying one freed blocks (a discard each on a file system mounted with -o
  // discard) that the next write allocated again, on fresh pages. Removed by Close, or by the
  // next open's scan after a crash.
  //
  // At most one per large block of the capacity (a deleted 1 GiB file's entries wait for the
  // next 1 GiB written), between 256 and 16,384. Their bytes count as used on disk, and as
  // free for an insert.
  static size_t MaxSpares(const Config& config);
  const size_t max_spares_;
  std::vector<Spare> spares_ ABSL_GUARDED_BY(mu_);
  uint64_t spare_bytes_ ABSL_GUARDED_BY(mu_) = 0;   // of spares_
  size_t spares_claimed_ ABSL_GUARDED_BY(mu_) = 0;  // room in spares_ taken by Unlink calls in flight

  // Forgotten entries waiting for forget_thread_, or for an insert that finds no spare to take
  // one (their bytes are in deleting_bytes_).
  std::deque<Victim> forgotten_ ABSL_GUARDED_BY(mu_);
  bool forget_stop_ ABSL_GUARDED_BY(mu_) = false;  // Close: delete what is left at full speed, end
  CondVar forget_cv_;
  std::thread forget_thread_;
};

}  // namespace kelp::mount::cache
