// FileData: the content of one regular file as this mount sees it. Layers, newest on top:
//   dirty      bytes written and not yet handed to an upload (DirtyBuffer, in memory)
//   inflight   bytes being uploaded (still in memory, readable), in the order they were taken
//   pending    chunks not yet committed to the filer (local order): uploaded blobs, or bytes
//              an fsync journals (they travel in the commit itself)
//   committed  the filer's chunk list (+ inline data, + the bytes of journaled chunks), loaded
//              lazily with GetChunks
// A read resolves committed + pending chunks to visible intervals and overlays the memory
// layers (read-your-writes): file_read.cc. A full slot of the dirty buffer
// (-chunkSizeLimitMB) is uploaded in the background; Flush packs what is left into few blobs,
// waits for every upload it depends on and commits everything in order (CommitChunks, or
// WriteInline for small files): file_write.cc. An fsync of few dirty bytes (at most
// FileContext::journal_max) sends them inside the commit instead of uploading them: one WAL
// sync at the filer is the fsync's only device flush (docs/mount.md, "Durability"). An upload
// error is kept and returned by the next Write/Flush (never swallowed).
//
// Thread-safety: every public method may be called from any thread. mu_ guards the state and
// is never held across an RPC, an upload or a fetch, nor while waiting for write budget.
// Flushes of one file are serialised (flushing_), so commits go out in order. mu_ is a leaf
// but for the budget's and the context's leaf locks taken under it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "filer/client/chunk_intervals.h"
#include "mount/core/chunk_fetcher.h"
#include "mount/core/clients.h"
#include "mount/core/dirty_buffer.h"
#include "mount/core/write_budget.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/thread_pool.h"

namespace kelp::mount {

// Volumes holding blobs that are not durable yet (uploaded without fsync).
// Thread-safety: every method may be called from any thread; StartWriteback/StopWriteback
// from the owner's.
class VolumeSet {
 public:
  ~VolumeSet() { StopWriteback(); }
  void Add(const std::set<uint32_t>& vids);
  std::set<uint32_t> Take();

  // Syncs what is added through blobs about interval after it came (the kernel's writeback
  // of dirty pages, for blobs): an fsync later then rarely has others' volumes to sync, so it
  // does not wait on a volume server it never wrote to (one frozen or dead holds up only the
  // fsyncs of that window). A failed sync stays for the next round or fsync. Until
  // StopWriteback (which syncs what is left once, then ends the thread).
  void StartWriteback(BlobStore* blobs, std::chrono::milliseconds interval);
  void StopWriteback();

 private:
  void WritebackLoop(BlobStore* blobs, std::chrono::milliseconds interval);

  Mutex mu_;  // a leaf (taken under FileData::mu_); never held across a sync
  CondVar added_;
  std::set<uint32_t> vids_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writeback_;
};

// Services every FileData of a mount shares. Owned by the Filesystem; outlives every FileData.
struct FileContext {
  FilerClient* meta = nullptr;
  BlobStore* blobs = nullptr;
  ChunkFetcher* fetcher = nullptr;
  WriteBudget* budget = nullptr;
  ThreadPool* uploads = nullptr;  // background uploads; -concurrentWriters threads
  uint64_t chunk_size = 4 << 20;  // slot and largest blob, in bytes
  // Slot buffers of finished uploads, for the next streaming writer of any file.
  SlotBufferPool slot_buffers;
  // Not-yet-durable volumes of files no longer open here (a FileData hands its own over when
  // its last handle closes, and again when it goes): the next fsync of any file syncs them
  // too, so an fsync through a new descriptor covers what an earlier, closed one wrote.
  VolumeSet closed_unsynced;
  uint32_t max_inline = 4096;  // files up to this size are written inline; 0 = never
  // An fsync with at most this many dirty bytes journals them in its commit (no upload);
  // 0 = never. At most filer::kMaxJournalCommit.
  uint64_t journal_max = 256 << 10;
  // Bytes of journaled chunks the mount's files may hold in memory in all; past it a file
  // that commits lets go of its view, journaled bytes included, and reads them back from the
  // filer (GetChunks) when needed.
  uint64_t journal_memory = 256 << 20;
  std::atomic<uint64_t> journal_held{0};
  Counter* journal_reloads = MetricsRegistry::Default().GetCounter(
      "kelp_mount_journal_reloads_total",
      "reads that found journaled bytes no longer in memory and loaded the chunk list again");
  // Called (without locks) with the attributes a commit returned.
  std::function<void(const Attr&)> on_attr;
};

class FileData : public std::enable_shared_from_this<FileData> {
 public:
  // A writer that never closes (a growing log, a huge copy) should not keep every chunk
  // uncommitted: past this many pending chunk records, the uploaded prefix is committed in the
  // background.
  static constexpr size_t kBackgroundCommitChunks = 64;
  FileData(FileContext* ctx, const Attr& attr);
  ~FileData();
  FileData(const FileData&) = delete;
  FileData& operator=(const FileData&) = delete;

  // The last handle closed: hands the volumes still owed a sync over to the mount
  // (FileContext::closed_unsynced) now, not when the object goes (a finishing upload task may
  // hold it a little longer), so an fsync through the next descriptor covers them.
  void HandOverUnsynced();

  uint64_t ino() const { return ino_; }

  // ---- The filer's view (file_data.cc) ----
  // New attributes from the filer (open, getattr, events). When the filer's version moved on
  // from what this mount last saw, the cached chunk list is dropped and, if nothing is dirty
  // here, the size is taken over. Returns true when the content changed elsewhere (the kernel's
  // page cache must go).
  bool Revalidate(const Attr& attr);
  // The content changed elsewhere (event stream): reload the chunk list on the next read.
  void MarkStale();
  // The filer's content as an Open answered it: taken as the chunk list when nothing newer
  // is known, so the first read costs no GetChunks.
  void Preload(const filer::GetChunksResponse& content);
  // The filer truncated (or extended) the file to attr.size; the caller flushed before.
  void Truncated(const Attr& attr);
  // This mount changed attributes other than the content (chmod, utimes...) and the filer
  // answered attr: the cached chunk list stays valid if nothing else happened in between.
  void NoteOwnAttrChange(const Attr& attr);

  // This mount created the file (nobody else has it changed yet): attribute changes made
  // while it is open here may wait for the commit.
  void MarkCreatedHere();
  // Takes req (mode, owner, times; a size while nothing of the file was uploaded yet) as a
  // change to send with the next commit, in the same call as the data, instead of a SetAttr of
  // its own (tar's chown, chmod and utimes of each file it writes). Of a file opened rather
  // than created here, only times, and only while it has data to commit (with the writeback
  // cache the kernel sends the times it kept before every fsync). False when the filer must
  // apply it now.
  bool SetAttrLocally(const filer::SetAttrRequest& req);

  uint64_t size() const;
  uint64_t dirty_bytes() const;
  // For Filesystem::SyncAhead. When an fsync now would journal the dirty bytes in its commit
  // (at most max of them; no flush running, no upload in flight or owed a sync, no error to
  // report) and no commit ahead is queued yet: marks one queued and returns the bytes; else 0.
  uint64_t ClaimSyncAhead(uint64_t max);
  // The queued commit ahead: the fsync the program would make, so its own fsync then waits for
  // this one and finds nothing new. False when it did not go (nothing left to commit, or no
  // longer a journaled commit). A failure keeps the data pending: the program's fsync commits
  // it and reports the error.
  absl::StatusOr<bool> SyncAhead();
  // A claimed commit ahead that will not run.
  void CancelSyncAhead();
  // Whether a change of the filer's content to `version` is (or may be) this mount's own: a
  // version it already knows, or one a commit of ours still in flight may produce. Events
  // for it need not drop the kernel's page cache.
  bool IsOwnVersion(uint64_t version) const;
  bool HasLocalChanges() const;
  // Puts this mount's view of size, mtime and the attribute changes waiting for the commit
  // into a.
  void OverlayAttr(Attr* a) const;

  // ---- Reads (file_read.cc) ----
  // Reads up to len bytes at offset (fewer at end of file). sequential: the reader streams.
  absl::StatusOr<size_t> Read(uint64_t offset, size_t len, char* dst, bool sequential);

  // ---- Writes and commits (file_write.cc) ----
  // Stores data at offset. Blocks while the write budget is exhausted.
  absl::Status Write(uint64_t offset, std::string_view data);
  // Uploads and commits everything written before the call. Without sync (close) the data is
  // committed, visible to every client, but uploaded without fdatasync. sync (fsync): also
  // durable on every replica: small dirty data travels in the commit itself (journaled, one
  // WAL sync); otherwise the volumes that received this file's lazy uploads are synced
  // (BlobStore::SyncVolumes) before the commit, which syncs the filer's WAL.
  absl::Status Flush(bool sync);
  // Hands all dirty bytes to background uploads (memory pressure). No commit.
  void UploadDirty();

 private:
  struct Upload {
    uint64_t seq = 0;  // local order
    std::vector<Extent> extents;
    uint64_t bytes = 0;
  };
  // Chunks resolved for reading: committed + pending, plus inline data and journaled bytes.
  struct Resolved {
    uint64_t file_size = 0;
    std::vector<filer::Chunk> chunks;
    std::string inline_data;
    // The bytes of the journaled chunks the intervals show, by chunk seq (sorted), shared with
    // journal_: only those, so a file with hundreds of journaled writes behind it does not copy
    // its whole journal map at every rebuild (a rebuild follows every commit).
    std::vector<std::pair<uint64_t, std::shared_ptr<const std::string>>> journal;
    std::vector<filer::VisibleInterval> intervals;
  };

  // ---- file_data.cc ----
  bool HasLocalChangesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the committed view (chunk list, inline data, journaled bytes of committed chunks);
  // the next read loads it again.
  void ClearViewLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes content (a GetChunks or Open reply) as the committed view.
  void LoadViewLocked(const filer::GetChunksResponse& content) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Journaled bytes held for chunk seq (a commit moves them from a pending seq to the filer's).
  void HoldJournalLocked(uint64_t seq, std::shared_ptr<const std::string> data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropJournalLocked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- file_read.cc ----
  absl::Status EnsureLoaded();
  std::shared_ptr<const Resolved> ResolvedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the committed chunks (and journaled bytes) that r shows nowhere: newer chunks cover
  // them, so a file rewritten in place by many small commits keeps a chunk list (and a
  // rebuild after each commit) the size of what is visible, not of its history.
  void PruneShadowedLocked(const Resolved& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The steps of Read: copy what the memory layers hold (returning the ranges they covered),
  // fill the rest from the visible intervals, start read-ahead, zero what lies past them.
  void OverlayMemoryLocked(uint64_t offset, uint64_t n, char* dst, std::vector<std::pair<uint64_t, uint64_t>>* covered)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FillFromIntervals(const Resolved& res, uint64_t offset, uint64_t n, char* dst,
                                 const std::vector<std::pair<uint64_t, uint64_t>>& covered, bool sequential);
  void ReadAhead(const Resolved& res, uint64_t from);
  static void ZeroTail(const Resolved& res, uint64_t offset, uint64_t n, char* dst,
                       const std::vector<std::pair<uint64_t, uint64_t>>& covered);

  // ---- file_write.cc ----
  // Flush, or with ahead a commit ahead of the program's fsync (SyncAhead): that one goes only
  // when it journals the dirty bytes (or writes them inline) with nothing else owed, else
  // returns false, and it leaves an upload's error for the program's own flush to report.
  absl::StatusOr<bool> FlushImpl(bool sync, bool ahead);
  // The dirty bytes when a sync flush now would journal them (or write them inline) with no
  // upload in flight or owed a sync and no error to report; 0 otherwise.
  uint64_t JournaledDirtyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts an upload of extents (taken from dirty_) in the background, or runs it here.
  std::shared_ptr<Upload> NewUploadLocked(std::vector<Extent> extents) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // All dirty bytes as uploads of about one chunk each (extents are not split): they run side
  // by side on the uploaders, and each gives its room back to the write budget when stored.
  std::vector<std::shared_ptr<Upload>> TakeDirtyUploadsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Packs up's extents into blobs and stores them. durable: with fsync (the last upload of an
  // fsync when nothing else awaits a sync).
  void RunUpload(const std::shared_ptr<Upload>& up, bool durable);
  // An fsync's upload that travels in the commit: its extents become journaled pending chunks.
  void JournalUpload(const std::shared_ptr<Upload>& up);
  // Syncs the volumes of this file's lazy uploads (and of closed files'); EIO on failure.
  absl::Status SyncUploads();
  void SubmitUpload(const std::shared_ptr<Upload>& up);
  void CommitInBackground();
  // Commits pending chunks of local seq <= barrier, in order, with the attribute changes in
  // attrs; a commit with no chunks sends attrs by SetAttr.
  absl::Status Commit(uint64_t barrier, bool sync, filer::SetAttrRequest* attrs);
  // Writes the whole (small) content of up inline, with the attribute changes in attrs.
  absl::Status WriteInline(const std::shared_ptr<Upload>& up, bool sync, filer::SetAttrRequest* attrs);
  // Puts attribute changes that did not reach the filer back, under newer ones made since.
  void RestoreAttrs(const filer::SetAttrRequest& attrs);
  bool InlineEligibleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FileContext* const ctx_;
  const uint64_t ino_;

  // Lock order: after DirHandle::mu and InodeTable::mu_; under it only leaves are taken
  // (ctx_->closed_unsynced's, ctx_->budget's). Never held across an RPC or a blob upload.
  mutable Mutex mu_;
  CondVar cv_;  // uploads finished, flush gate released
  uint64_t size_ ABSL_GUARDED_BY(mu_);
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = 0;  // last local write not yet committed; 0 = none
  uint64_t known_version_ ABSL_GUARDED_BY(mu_);  // newest filer version this mount knows of
  // The committed chunk list, valid when loaded_ (at view_version_).
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t view_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<filer::Chunk> committed_ ABSL_GUARDED_BY(mu_);  // journaled ones without their data
  std::string inline_data_ ABSL_GUARDED_BY(mu_);
  uint64_t load_generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumps when the view is dropped
  std::shared_ptr<const Resolved> resolved_ ABSL_GUARDED_BY(mu_);  // null = recompute
  // The bytes of journaled chunks, committed and pending, by chunk seq; journal_bytes_ is
  // their total (counted in FileContext::journal_held).
  std::map<uint64_t, std::shared_ptr<const std::string>> journal_ ABSL_GUARDED_BY(mu_);
  uint64_t journal_bytes_ ABSL_GUARDED_BY(mu_) = 0;

  DirtyBuffer dirty_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Upload>> inflight_ ABSL_GUARDED_BY(mu_);
  std::vector<filer::Chunk> pending_ ABSL_GUARDED_BY(mu_);  // seq = kPendingSeqBase + local seq
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // first failed background upload, until reported
  std::set<uint32_t> unsynced_ ABSL_GUARDED_BY(mu_);  // volumes of lazy uploads since the last sync
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  bool sync_ahead_queued_ ABSL_GUARDED_BY(mu_) = false;
  int commits_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Attribute changes made here for the next commit, with concrete times (no *_NOW bits) and
  // CTIME set: applied over the filer's attributes by OverlayAttr.
  bool created_here_ ABSL_GUARDED_BY(mu_) = false;
  filer::SetAttrRequest pending_attrs_ ABSL_GUARDED_BY(mu_);
};

// Pending chunks sort above every committed one: the filer's seqs stay far below this.
inline constexpr uint64_t kPendingSeqBase = 1ull << 62;

}  // namespace kelp::mount
