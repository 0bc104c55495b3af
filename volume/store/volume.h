// One volume: an append-only .dat of needles, its .idx, and the in-memory CompactMap
// (formats in needle_format.h / docs/needle-format.md).
//
// Threads: every method is thread-safe. Writes and deletes are serialised by write_mu_,
// which is held across the append's pwrite (the append offset is the serialisation point)
// but never across fdatasync: durable writes wait in a group commit, where one leader syncs
// for everyone who appended before it. Reads take map_mu_ shortly to find a needle and the
// file it lives in, then pread without any lock; a vacuum switching files under them is
// harmless because each read holds a reference to the file it found the needle in.
//
// Lock order: compact_mu_ -> write_mu_ -> map_mu_ -> sync_mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shared/mutex.h"
#include "volume/store/block_sums.h"
#include "volume/store/compact_map.h"
#include "volume/store/env.h"
#include "volume/store/needle.h"

namespace kelp::volume {

class Volume {
 public:
  struct Options {
    std::string dir;                       // where <base>.dat and <base>.idx live
    uint32_t id = 0;                       // volume id, > 0
    std::string collection;                // "" for none; part of the file names
    std::string replication = "000";       // "xyz"; recorded in the superblock on creation
    uint64_t size_limit = 30000ull << 20;  // bytes; at or over it the volume turns read-only
    Env* env = nullptr;                    // nullptr = Env::Default()
  };

  // Creates a new, empty volume (AlreadyExists if its .dat is there).
  static absl::StatusOr<std::unique_ptr<Volume>> Create(Options options);
  // Opens an existing volume, recovering from a crash (see docs/needle-format.md). The
  // replication recorded in the superblock wins over options.replication.
  static absl::StatusOr<std::unique_ptr<Volume>> Open(Options options);
  ~Volume();

  // "<dir>/<collection>_<id>" or "<dir>/<id>": the path of the files without extension.
  static std::string BasePath(const std::string& dir, const std::string& collection, uint32_t id);

  uint32_t id() const { return opts_.id; }
  const std::string& collection() const { return opts_.collection; }
  const std::string& replication() const { return replication_; }
  // Copies of each needle the replication asks for (1 + x + y + z).
  int copies() const { return copies_; }

  struct WriteResult {
    uint32_t size = 0;      // data bytes
    uint64_t checksum = 0;  // xxHash3 of the data (the ETag)
    // Another kSyncBehindBytes were appended without a sync since the last write that said
    // so: its caller should run SyncBehind in the background.
    bool sync_behind = false;
  };
  // Sync behind a stream of lazy writes: every this many bytes appended, one fdatasync in the
  // background, so that the fsync that ends the stream flushes only its tail. The device (a
  // VM's disk, a drive's cache) takes writes far faster than it makes them durable, and a
  // flush pays for all it holds: the fsync after a 1 GiB write through a mount spent 578 ms
  // in the volumes' fdatasync with nothing flushed before it (bench/RESULTS.md, "Evening,
  // 2026-12-06 (16)").
  static constexpr uint64_t kSyncBehindBytes = 32 << 20;
  // Appends a needle. With sync, returns only once it is on disk (group commit). Fails with
  // EROFS when read-only or full, ENOSPC when the disk is full (the volume stays as it was),
  // EEXIST when the key exists with another cookie, EFBIG when data is too large.
  absl::StatusOr<WriteResult> Write(uint64_t key, uint32_t cookie, std::string_view data,
                                    bool sync = false);
  // Appends a tombstone; returns the deleted data size. NotFound if absent or the cookie
  // does not match.
  absl::StatusOr<uint32_t> Delete(uint64_t key, uint32_t cookie, bool sync = false);
  // Waits until everything appended so far is durable (by this process, or by an earlier
  // one before this volume was opened): one fdatasync, shared with concurrent durable writes,
  // or none when nothing was appended since the last.
  absl::Status Sync();
  // The background sync a write asked for (WriteResult::sync_behind): a Sync, unless one
  // asked this way runs already (the next step asks again). A failure is what a failed Sync
  // is: logged, and the volume read-only.
  void SyncBehind();

  // A live needle, found without reading it. Reading through it needs no lock and stays
  // valid across vacuum (it holds the file the needle was found in).
  struct Handle {
    std::shared_ptr<File> file;
    uint64_t offset = 0;  // of the needle
    uint32_t size = 0;    // data bytes
    uint64_t key = 0;
    uint64_t data_offset() const { return offset + format::kHeaderSize; }
  };
  // nullopt when the key is absent or deleted.
  std::optional<Handle> Find(uint64_t key) const;
  // The data size of a live needle (cheap: no I/O).
  std::optional<uint32_t> SizeOf(uint64_t key) const;
  // Find, for a needle whose cookie matches, with its header read and checked against the
  // index (no checksum). NotFound if absent, deleted or another cookie; DataLoss if the header
  // does not match the index.
  absl::StatusOr<Handle> FindChecked(uint64_t key, uint32_t cookie) const;
  // The absolute path of the .dat, for a reader on this machine that reads needles found with
  // FindChecked straight from the file (docs/volume-http.md, "Local reads"): the needle's
  // header tells it whether the file it opened is the one the offset is in (a vacuum renames a
  // new .dat over this path). "" when the volume is not on real files (Env::real_files).
  const std::string& dat_path() const { return dat_path_; }
  // The data size of live needle key if its cookie matches: one header read, no checksum
  // (fsck asks this of every blob). NotFound if absent, deleted or another cookie; DataLoss
  // if the header does not match the index.
  absl::StatusOr<uint32_t> Stat(uint64_t key, uint32_t cookie) const;
  // Live needles with keys above after_key, in key order, at most limit of them (fsck looks
  // for leaked blobs): one header read each for the cookie. *more says whether any are left.
  struct Listed {
    uint64_t key = 0;
    uint32_t cookie = 0;
    uint32_t size = 0;
  };
  absl::StatusOr<std::vector<Listed>> List(uint64_t after_key, size_t limit, bool* more) const;

  // Reads a whole needle into *buf and verifies it; the result's data points into *buf.
  // NotFound if absent, deleted or the cookie differs; DataLoss (logged and counted) if the
  // needle on disk is corrupt.
  absl::StatusOr<DecodedNeedle> Read(uint64_t key, uint32_t cookie, std::string* buf) const;
  // The same for a needle already found.
  absl::StatusOr<DecodedNeedle> Read(const Handle& h, uint32_t cookie, std::string* buf) const;
  // Verifies a needle of any size by streaming it through the hash (for bodies too large to
  // hold); returns it with empty data. Same errors as Read.
  absl::StatusOr<DecodedNeedle> Verify(const Handle& h, uint32_t cookie) const;
  // Reads [offset, offset + len) of a needle's data into *buf, verified; the result's data
  // points into *buf. The first ranged read of a needle verifies it whole (as Verify) and
  // keeps a sum per 64 KiB block (BlockSums); later ones read and check only the blocks they
  // cover. Same errors as Read; OutOfRange if the range is not within the data.
  absl::StatusOr<DecodedNeedle> ReadRange(const Handle& h, uint32_t cookie, uint64_t offset, uint64_t len,
                                          std::string* buf) const;

  struct Stats {
    uint64_t size = 0;           // bytes in the .dat
    uint64_t file_count = 0;     // live needles
    uint64_t delete_count = 0;   // deletes since the last vacuum
    uint64_t deleted_bytes = 0;  // garbage a vacuum would reclaim
    uint64_t max_key = 0;
    bool read_only = false;
    uint64_t map_bytes = 0;  // memory held by the in-memory index
  };
  Stats GetStats() const;
  // Garbage bytes / .dat bytes, in [0, 1].
  double GarbageRatio() const;
  uint64_t checksum_failures() const { return checksum_failures_.load(); }

  bool read_only() const;
  // Read-only by order of the coordinator (a full volume stays read-only regardless).
  void SetReadOnly(bool read_only);
  void SetSizeLimit(uint64_t bytes);

  // Test hooks run by Compact between its phases, without any lock held.
  struct CompactHooks {
    std::function<void()> after_copy;     // live needles copied, before catching up
    std::function<void()> after_catchup;  // caught up without lock, before the locked switch
  };
  struct CompactResult {
    uint64_t size_before = 0;
    uint64_t size_after = 0;
  };
  // Vacuum: copies live needles into new files while reads and writes go on, catches up with
  // the writes made meanwhile, then switches. Unavailable if another vacuum of this volume
  // is running.
  absl::StatusOr<CompactResult> Compact(const CompactHooks* hooks = nullptr);

  // Removes the volume's files. Reads already holding a Handle still work; everything else
  // fails from now on.
  absl::Status Destroy();

 private:
  explicit Volume(Options options);
  absl::Status CreateFiles();
  absl::Status Load();
  absl::Status LoadIndex(uint64_t dat_size, uint64_t* indexed_end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status ScanTail(uint64_t from, uint64_t dat_size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void RecomputeStats() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status CheckWritable(uint64_t needle_len, bool is_delete) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Appends needle bytes + an index record; on failure truncates both files back.
  absl::Status Append(std::string_view needle, std::string_view data_piece, std::string_view tail,
                      const IndexRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Drop-behind of a stream of appends (see kWritebackStep in volume.cc): starts the device
  // on the last step, and leaves the wait for the step before it (and the dropping of its
  // pages) in drop_due_, for the appender to run once it let go of write_mu_ (RunDueDrop).
  void DropBehind(const std::shared_ptr<File>& dat) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // A step of the .dat written to the device whose pages are to go once it is on it.
  struct DueDrop {
    std::shared_ptr<File> dat;
    uint64_t offset = 0, len = 0;
  };
  // Waits for the due step's writeback and drops its pages, if one is due; called without
  // write_mu_ (the wait took the append lock for the device's time: other appends, every
  // upload to this volume, waited behind it).
  static void RunDueDrop(std::optional<DueDrop> due);
  // The .dat changed under the appends (opened, created, compacted): start drop-behind afresh.
  // Drop-behind and sync-behind start over at end_ (a new, loaded or compacted file).
  void ResetDropBehind() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
    wb_started_ = wb_dropped_ = sync_behind_at_ = end_;
  }
  absl::StatusOr<uint32_t> CookieAt(const File& file, uint64_t offset) const;
  // Verify, also taking the sum of each BlockSums::kBlockSize block into *blocks if not null.
  absl::StatusOr<DecodedNeedle> VerifyWhole(const Handle& h, uint32_t cookie, std::vector<uint64_t>* blocks) const;
  absl::Status WaitDurable(uint64_t seq);
  absl::Status ChecksumFailure(const absl::Status& s, uint64_t key) const;
  void RecoverCompactionFiles();

  const Options opts_;
  const std::string base_;
  int copies_ = 1;
  std::string replication_;  // from the superblock; fixed once opened
  Env* env_;
  const std::string dat_path_;  // see dat_path()

  // Lock order: compact_mu_, then write_mu_, then map_mu_ (each may be taken alone).
  // sync_mu_ is a leaf: WaitDurable releases it before it takes map_mu_.
  Mutex compact_mu_ ABSL_ACQUIRED_BEFORE(write_mu_);  // one vacuum at a time

  mutable Mutex write_mu_ ABSL_ACQUIRED_BEFORE(map_mu_);
  uint64_t end_ ABSL_GUARDED_BY(write_mu_) = 0;      // .dat length
  uint64_t idx_end_ ABSL_GUARDED_BY(write_mu_) = 0;  // .idx length
  // Drop-behind: [wb_dropped_, wb_started_) was handed to the device and is still cached;
  // before wb_dropped_ the .dat's pages were dropped (or never counted).
  uint64_t wb_started_ ABSL_GUARDED_BY(write_mu_) = 0;
  uint64_t wb_dropped_ ABSL_GUARDED_BY(write_mu_) = 0;
  std::optional<DueDrop> drop_due_ ABSL_GUARDED_BY(write_mu_);  // taken by the appender
  uint64_t sync_behind_at_ ABSL_GUARDED_BY(write_mu_) = 0;      // end_ when a write last asked
  std::atomic<bool> sync_behind_running_{false};
  Superblock superblock_ ABSL_GUARDED_BY(write_mu_);
  uint64_t live_bytes_ ABSL_GUARDED_BY(write_mu_) = 0;  // needle bytes of live needles
  bool destroyed_ ABSL_GUARDED_BY(write_mu_) = false;

  mutable SharedMutex map_mu_;
  CompactMap map_ ABSL_GUARDED_BY(map_mu_);
  std::shared_ptr<File> dat_ ABSL_GUARDED_BY(map_mu_);
  std::shared_ptr<File> idx_ ABSL_GUARDED_BY(map_mu_);

  // Read without locks by GetStats; written under write_mu_.
  std::atomic<uint64_t> size_{0}, file_count_{0}, delete_count_{0}, garbage_{0}, max_key_{0},
      map_bytes_{0};
  std::atomic<uint64_t> size_limit_;
  std::atomic<bool> ordered_read_only_{false};
  std::atomic<bool> broken_{false};  // a failed fdatasync: nothing more is accepted
  mutable std::atomic<uint64_t> checksum_failures_{0};
  mutable BlockSums block_sums_{4 << 20};  // about 6,500 needles of 4 MiB (600 bytes each)

  // Group commit. appended_seq_ counts appends (never reset, even by vacuum); a leader
  // fdatasyncs for every append with a sequence at or below the one it saw before syncing.
  std::atomic<uint64_t> appended_seq_{0};
  Mutex sync_mu_;
  CondVar sync_cv_;
  uint64_t durable_seq_ ABSL_GUARDED_BY(sync_mu_) = 0;
  bool sync_running_ ABSL_GUARDED_BY(sync_mu_) = false;
};

}  // namespace kelp::volume
