// FilerService: the filer's namespace core. It keeps the file tree in a KvStore keyed by
// inode (docs/filer-keys.md) and implements every metadata operation with POSIX semantics
// and the errno Linux gives (carried in the absl::Status, shared/status.h). Transport
// adapters (filer/grpc, the HTTP dialects, fsck) call it; it knows nothing of them.
//
// Every mutation is one atomic WriteBatch: the change, its events (event_log.h) and the GC
// queue entries of the blobs it stops referencing (gc_worker.h). Read-modify-writes happen
// under striped inode locks (lock_table.h documents the lock order); nothing holds a lock
// across a sync of the WAL or an RPC. Each operation also runs as one store transaction
// (Transact, txn.h), retried when it conflicts: that is what keeps read-check-writes atomic
// when several filers share the store (docs/filer-stores.md); counters come in ranges taken
// from the store (sequence.h) and sessions live in the store (session_table.h), so any
// filer can answer any request of any client.
//
// Threads: construct, Start() and Stop() from one owner thread; every other method may be
// called from any thread concurrently once Start() returned OK and until Stop() begins.
// Start() runs two threads of its own (GC, maintenance) unless options.background_loops is
// false; Stop() joins them and wakes every event subscriber. While started it exports gauges
// (kelp_filer_inodes, _sessions, _event_seq, _gc_pending, _gc_deleted_total,
// _gc_failed_total) to MetricsRegistry::Default().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "filer/cluster/cluster_api.h"
#include "shared/metrics.h"
#include "filer/core/clock.h"
#include "filer/core/event_log.h"
#include "filer/core/gc_worker.h"
#include "filer/core/lock_table.h"
#include "filer/core/options.h"
#include "filer/store/sequence.h"
#include "filer/core/session_table.h"
#include "filer/core/txn.h"
#include "filer/store/kv_store.h"
#include "filer/store/records.h"
#include "proto/filer.pb.h"
#include "shared/mutex.h"
#include "volume/client/blob_store.h"

namespace kelp::filer {

class Mutation;

struct CreateArgs {
  uint64_t parent = 0;
  std::string name;
  uint32_t mode = 0;  // S_IFMT bits pick the type; none = regular file
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t rdev = 0;  // character and block devices
  // Regular files: EEXIST if the name exists. Without it an existing regular file is
  // returned as is (open(O_CREAT) without O_EXCL). Other types are always exclusive.
  bool exclusive = false;
  // With open_handle, the new (or existing) file counts as open by this session.
  std::string session;
  bool open_handle = false;
  // An existing regular file of some size is truncated to 0 (open with O_TRUNC).
  bool truncate = false;
};

struct RenameResult {
  Attr moved;
  std::optional<Attr> replaced;  // the inode that was at the target (nlink after)
  std::vector<FreedBlob> freed;  // its blobs, when it went with its last name
};

class FilerService {
 public:
  // kv and cluster are not owned and must outlive the service.
  FilerService(KvStore* kv, ClusterApi* cluster, FilerOptions options);
  ~FilerService();
  FilerService(const FilerService&) = delete;
  FilerService& operator=(const FilerService&) = delete;

  // Loads the sequences and counters, creates the root directory (inode 1) on first use and
  // starts the background loops.
  absl::Status Start();
  // Stops the loops, ends every subscription (UNAVAILABLE) and syncs the store.
  void Stop();

  // --- Reads ---------------------------------------------------------------------------
  // "." and ".." resolve to the directory and its parent.
  absl::StatusOr<Attr> Lookup(uint64_t parent, std::string_view name);
  absl::StatusOr<Attr> GetAttr(uint64_t ino);
  // Entries after `cookie` (0 = from the start) in cookie order, which is the order entries
  // were added (a rename into the directory adds; one within it keeps the entry's place).
  // Cookies are stable: an entry keeps its cookie while it exists, so entries added or
  // removed during a listing never make others vanish or repeat. fn returns false to stop
  // early. limit 0 = all. Memory is constant in the directory size.
  using EntryFn = std::function<bool(DirEntry&&)>;
  absl::Status ReadDir(uint64_t ino, uint64_t cookie, size_t limit, bool with_attrs,
                       const EntryFn& fn);
  // Entries whose names sort after start_after, in byte order of the names (the HTTP
  // dialects' lastFileName paging). Cookies are filled in too.
  absl::Status ListByName(uint64_t ino, std::string_view start_after, size_t limit,
                          bool with_attrs, const EntryFn& fn);
  // Resolves an absolute path ("/a/b"; "" and "/" are the root) without following symlinks.
  absl::StatusOr<Attr> ResolvePath(std::string_view path);

  // --- Namespace ---------------------------------------------------------------------
  absl::StatusOr<Attr> Create(const CreateArgs& args);
  absl::StatusOr<Attr> Symlink(uint64_t parent, std::string_view name, std::string_view target,
                               uint32_t uid, uint32_t gid);
  absl::StatusOr<Attr> Link(uint64_t ino, uint64_t new_parent, std::string_view new_name);
  // Returns the inode afterwards (nlink may be 0: then it is purged or, if open, an orphan).
  // freed (may be null) receives the blobs of a purged inode.
  absl::StatusOr<Attr> Unlink(uint64_t parent, std::string_view name,
                              std::vector<FreedBlob>* freed = nullptr);
  absl::Status Rmdir(uint64_t parent, std::string_view name);
  // Unlinks several names of one directory in one atomic write (the mount's unlinks behind
  // come in such runs): each name's result is what Unlink would have answered, with the
  // directory's attributes just after that name went (its version counts every removal, as
  // separate unlinks would).
  struct Unlinked {
    absl::StatusOr<Attr> attr;
    std::optional<Attr> parent_attr;
    std::vector<FreedBlob> freed;  // with the name whose removal purged the inode
  };
  std::vector<Unlinked> UnlinkMany(uint64_t parent, const std::vector<std::string>& names);
  // Removes name and, if it is a directory, everything below it (HTTP DELETE ?recursive=true).
  // Not atomic: it is a depth-first series of Unlink/Rmdir, each atomic; entries added
  // concurrently are removed too or make it fail ENOTEMPTY after a few rounds.
  absl::Status RemoveTree(uint64_t parent, std::string_view name);
  // flags: kRenameNoReplace, kRenameExchange (filer/client/limits.h).
  absl::StatusOr<RenameResult> Rename(uint64_t parent, std::string_view name,
                                      uint64_t new_parent, std::string_view new_name,
                                      uint32_t flags);
  // req.valid says which fields apply (SetAttrBits). SIZE truncates: shrinking drops and
  // trims chunk records and collects blobs nothing references any more; growing reads zeros.
  // ctime becomes now unless CTIME is given.
  absl::StatusOr<Attr> SetAttr(const SetAttrRequest& req);

  // --- Extended attributes -----------------------------------------------------------
  absl::StatusOr<std::string> GetXattr(uint64_t ino, std::string_view name);
  // flags: kXattrCreate, kXattrReplace.
  absl::Status SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                        uint32_t flags);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, std::string_view name);

  // --- Data --------------------------------------------------------------------------
  absl::StatusOr<StatFsResponse> StatFs();
  // Attributes, inline data and chunk records (seq order) as one consistent snapshot.
  absl::StatusOr<GetChunksResponse> GetChunks(uint64_t ino);
  // Appends records with filer-assigned seqs (O(new chunks)); compacts the list when it has
  // grown past options.compact_min_chunks / twice its last compacted size. sync: the WAL is
  // synced before returning. replace: the old content (chunks, inline data) is dropped in
  // the same batch and the size becomes exactly the new chunks' reach (or min_size). attrs:
  // attribute changes applied after the chunks (no SIZE).
  absl::StatusOr<CommitChunksResponse> CommitChunks(const CommitChunksRequest& req);
  // The same with the WAL synced or not as `sync` says, whatever req.sync() (a batch of commits
  // writes each unsynced and syncs once: SyncAll).
  absl::StatusOr<CommitChunksResponse> CommitChunks(const CommitChunksRequest& req, bool sync);
  // Replaces the content with data (at most kMaxInlineSize bytes), collecting every chunk.
  // attrs (may be null): attribute changes applied after the data, as SetAttr would (no SIZE).
  absl::StatusOr<Attr> WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns,
                                   bool sync, const SetAttrRequest* attrs = nullptr);
  // Syncs the WAL: every mutation acknowledged so far is durable.
  absl::Status Fsync(uint64_t ino);
  // Syncs the WAL, for no inode in particular.
  absl::Status SyncAll();

  // --- Journaled chunks (journal.cc) --------------------------------------------------
  // Where journaled bytes move to (the filer's blob client); until set, they stay in the store.
  // May be called once the service started. Not owned.
  void SetBlobStore(volume::BlobStore* blobs);
  // Moves the journaled bytes committed at or before older_than_ms (ms since the epoch) into
  // blobs, one per inode (each inode once a call), at most about max_bytes a round, all made
  // durable by one sync of their volumes before any record names them; their chunk records
  // keep their seqs. Returns the bytes moved. The maintenance loop calls it with
  // options.journal_age; tests call it.
  absl::StatusOr<uint64_t> MoveJournal(int64_t older_than_ms, uint64_t max_bytes);

  // --- Sessions ----------------------------------------------------------------------
  absl::StatusOr<OpenSessionResponse> OpenSession(std::string_view client);
  // Extends the lease. An unknown session answers NOT_FOUND unless reattach is set: then the
  // session is (re)created under this id holding exactly open_inodes (inodes that no longer
  // exist are skipped).
  absl::Status KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes,
                         bool reattach);
  absl::Status Open(std::string_view session, uint64_t ino);
  // Drops one open of each inode listed (one per time it is listed), in one transaction.
  // freed (may be null) receives the blobs of unlinked inodes that went with this release.
  absl::Status Release(std::string_view session, const std::vector<uint64_t>& inodes,
                       std::vector<FreedBlob>* freed = nullptr);
  absl::Status Release(std::string_view session, uint64_t ino) { return Release(session, std::vector<uint64_t>{ino}); }

  // --- Events ------------------------------------------------------------------------
  // from_seq 0 = only events after now. path_prefix ("" or "/" = everything) names a
  // directory, resolved once now: events of entries in its subtree are delivered (attribute
  // and data events are placed by the inode's parent pointer; events whose place cannot be
  // decided any more are delivered). A from_seq older than retention (or newer than any
  // event) starts with EVENT_RESET. skip_origin (not 0): the events of changes that client
  // made (Event.origin) are left out.
  absl::StatusOr<std::unique_ptr<EventSubscription>> Subscribe(uint64_t from_seq,
                                                               std::string_view path_prefix,
                                                               uint64_t skip_origin = 0);

  // --- Cluster pass-through and maintenance --------------------------------------------
  ClusterApi* cluster() { return cluster_; }
  GcWorker& gc() { return gc_; }
  EventLog& events() { return events_; }
  // One round of session expiry, orphan purge (after the start grace) and event trimming.
  // The maintenance thread calls it every options.maintenance_interval; tests call it.
  void RunMaintenance();
  // Inodes in the namespace (including orphans), kept exactly with the mutations (on a store
  // other filers share, as of at most a second ago).
  int64_t InodeCount();
  // Operations that lost to a concurrent change in the store and ran again.
  uint64_t txn_retries() const { return txn_retries_->value(); }
  const FilerOptions& options() const { return opts_; }

 private:
  friend class Mutation;

  // Runs fn as one store transaction (TxnScope): its reads through rd(), its Mutation's
  // commit. When the store answers a conflict (another filer changed what fn read), fn runs
  // again from the start, after a randomized backoff. fn returns a Status or StatusOr.
  template <typename F>
  auto Transact(F&& fn) -> decltype(fn());
  // Where an operation reads: the thread's transaction when it runs one, else the store.
  KvReader& rd() {
    KvTxn* t = TxnScope::Current(this);
    return t ? static_cast<KvReader&>(*t) : static_cast<KvReader&>(*kv_);
  }
  void BackoffAfterConflict(int attempt);
  void InvalidateInodeCount() {
    MutexLock lock(count_mu_);
    count_at_mono_ns_ = -1;
  }

  // One attempt of each mutating operation (the public ones wrap them in Transact).
  absl::StatusOr<Attr> CreateNodeOnce(const CreateArgs& args, std::string_view symlink_target,
                                      uint64_t* existing);
  absl::StatusOr<Attr> LinkOnce(uint64_t ino, uint64_t new_parent, std::string_view new_name);
  absl::StatusOr<RenameResult> RenameOnce(uint64_t parent, std::string_view name,
                                          uint64_t new_parent, std::string_view new_name,
                                          uint32_t flags);
  absl::StatusOr<Attr> SetAttrOnce(const SetAttrRequest& req);
  absl::Status SetXattrOnce(uint64_t ino, std::string_view name, std::string_view value,
                            uint32_t flags);
  absl::Status RemoveXattrOnce(uint64_t ino, std::string_view name);
  absl::StatusOr<CommitChunksResponse> CommitChunksOnce(const CommitChunksRequest& req, bool sync);
  absl::StatusOr<Attr> WriteInlineOnce(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync,
                                       const SetAttrRequest* attrs);
  absl::Status PurgeOrphanOnce(uint64_t ino, std::vector<FreedBlob>* freed);
  // Drops a lapsed session and its opens; appends inodes nobody holds any more to *freed.
  absl::Status ExpireSession(const std::string& id, std::vector<uint64_t>* freed);

  // Helpers shared by the operations (filer_service.cc).
  absl::StatusOr<InodeRecord> LoadInode(uint64_t ino);
  // Adds delta (+1: a new xattr name, -1: one removed) to rec's xattr count, counting the
  // stored ones first when rec predates the count. Call under the inode's lock.
  absl::Status CountXattrs(InodeRecord& rec, int delta);
  absl::StatusOr<InodeRecord> LoadDir(uint64_t ino);  // ENOTDIR unless a directory
  absl::StatusOr<std::optional<DentryValue>> LoadDentry(uint64_t parent, std::string_view name);
  absl::StatusOr<bool> DirIsEmpty(uint64_t ino);
  // Adds name -> rec to dir (dentry + readdir index; dir.next_cookie advances).
  void AddEntry(Mutation& m, InodeRecord& dir, std::string_view name, const InodeRecord& rec);
  void RemoveEntry(Mutation& m, uint64_t parent, std::string_view name, const DentryValue& d);
  // Points an existing entry at another inode, keeping its cookie.
  void RepointEntry(Mutation& m, uint64_t parent, std::string_view name, uint64_t cookie,
                    const InodeRecord& rec);
  void PutInode(Mutation& m, InodeRecord& rec);  // bumps version
  // rec has nlink 0: keep it as an orphan while open, else purge it now.
  absl::Status DropOrOrphan(Mutation& m, InodeRecord& rec);
  // Deletes the inode with its chunks (to GC), inline data, xattrs and, when `marked` (it was
  // an orphan), its orphan mark.
  absl::Status PurgeInode(Mutation& m, const InodeRecord& rec, bool marked);
  // Purges ino if it is an orphan nobody holds open. Takes the inode's lock.
  // freed (may be null): the purged inodes' blobs are appended.
  absl::Status PurgeOrphanIfUnused(uint64_t ino, std::vector<FreedBlob>* freed = nullptr);
  absl::Status PurgeOrphansIfUnused(const std::vector<uint64_t>& inos, std::vector<FreedBlob>* freed = nullptr);
  // Is `dir` the directory `ancestor` or inside it? Walks parent pointers.
  absl::StatusOr<bool> IsWithin(uint64_t dir, uint64_t ancestor);
  absl::Status TruncateLocked(Mutation& m, InodeRecord& rec, uint64_t size);
  // The bits of req other than SIZE (filer/client/set_attr.h).
  void ApplyAttrBits(InodeRecord& rec, const SetAttrRequest& req, int64_t now);
  // Drops every chunk record (blobs to GC) and the inline data; size becomes 0.
  absl::Status DropContentLocked(Mutation& m, InodeRecord& rec);
  absl::Status MaybeCompactLocked(Mutation& m, InodeRecord& rec, const std::vector<Chunk>& added);
  // Fills in the bytes of the journaled chunks (no fid) of resp from the J family.
  absl::Status AttachJournal(uint64_t ino, GetChunksResponse* resp);
  absl::StatusOr<Attr> CreateNode(const CreateArgs& args, std::string_view symlink_target);
  // Unlink and Rmdir.
  absl::StatusOr<InodeRecord> RemoveName(uint64_t parent, std::string_view name, bool rmdir,
                                         std::vector<FreedBlob>* freed);
  // One attempt of UnlinkMany. A name whose entry changed between the first read and the locks
  // is left with retry set, for a plain Unlink afterwards.
  absl::Status UnlinkManyOnce(uint64_t parent, const std::vector<std::string>& names,
                              std::vector<Unlinked>* out, std::vector<bool>* retry);
  absl::Status EmptyDir(uint64_t dir, int depth);
  // Rename once every involved inode is locked and the dentries re-validated.
  absl::StatusOr<RenameResult> RenameLocked(const LockTable::Guard& guard, uint64_t parent,
                                            std::string_view name, const DentryValue& src,
                                            uint64_t new_parent, std::string_view new_name,
                                            const std::optional<DentryValue>& dst,
                                            uint32_t flags);
  absl::Status EnsureRoot();
  absl::Status LoadCounters();
  void MaintenanceLoop();
  int64_t NowNs() { return clock_->WallNs(); }

  KvStore* const kv_;
  ClusterApi* const cluster_;
  const FilerOptions opts_;
  Clock* const clock_;
  LockTable locks_;
  // Serialises cross-directory renames that move directories, so the "not into its own
  // subtree" walk cannot race with another such rename (Linux's s_vfs_rename_mutex).
  // Taken before any stripe.
  Mutex rename_mu_;
  SequenceAllocator inode_seq_;
  SequenceAllocator chunk_seq_;
  EventLog events_;
  SessionTable sessions_;
  GcWorker gc_;
  // Inode counts, one per lock stripe, each read and written (keys::CounterKey) in the
  // transaction of a mutation that holds its stripe. This is this filer's copy; on a shared
  // store others change the keys too, so InodeCount() reads them back from the store.
  // Atomic only so InodeCount() can read them without the stripes.
  std::unique_ptr<std::atomic<int64_t>[]> counters_;
  Mutex count_mu_;  // a leaf
  int64_t count_cache_ ABSL_GUARDED_BY(count_mu_) = 0;
  int64_t count_at_mono_ns_ ABSL_GUARDED_BY(count_mu_) = -1;
  std::atomic<size_t> session_count_{0};
  Counter* const txn_retries_;
  // Until when orphans are kept for mounts re-announcing their open files (Start: the
  // grace period after a start that found sessions in the store; none found, none kept).
  int64_t orphan_grace_end_mono_ns_ = 0;
  bool InOrphanGrace() const { return clock_->MonoNs() < orphan_grace_end_mono_ns_; }

  // A leaf: guards the maintenance loop's stop flag only (released while maintenance runs).
  Mutex loop_mu_;
  CondVar loop_cv_;
  bool stopping_ ABSL_GUARDED_BY(loop_mu_) = false;
  std::thread maintenance_;
  std::atomic<bool> started_{false};
  std::vector<int> metric_callbacks_;  // MetricsRegistry::Default() ids, removed at Stop()
  std::atomic<volume::BlobStore*> blobs_{nullptr};

  // Inodes with journaled bytes, by the commit time (ms) of their oldest J record, so
  // MoveJournal reads only what is due (scanning the whole J family every second would read
  // every journaled byte again and again). An inode is in due_ (with its time in
  // journal_oldest_) from its first journaled commit until MoveJournal finds it has no J
  // record left; both change only with the inode's lock held (journal.cc). Filled from the
  // store at Start(), and on a shared store by the coordinator every maintenance round.
  void NoteJournaledLocked(uint64_t ino, int64_t commit_ms);
  // With ino's lock held: queues ino by its oldest J record, or forgets it when it has none.
  absl::Status RequeueJournalLocked(uint64_t ino);
  absl::Status LoadJournalQueue();
  void ClearJournalQueue() {
    MutexLock lock(journal_mu_);
    journal_due_.clear();
    journal_oldest_.clear();
  }
  Mutex journal_mu_;  // a leaf
  std::set<std::pair<int64_t, uint64_t>> journal_due_ ABSL_GUARDED_BY(journal_mu_);
  std::unordered_map<uint64_t, int64_t> journal_oldest_ ABSL_GUARDED_BY(journal_mu_);
};

template <typename F>
auto FilerService::Transact(F&& fn) -> decltype(fn()) {
  // Enough that a conflict storm between filers on one hot directory still ends in success;
  // each attempt backs off longer (up to ~64 ms).
  constexpr int kAttempts = 64;
  for (int attempt = 0;; ++attempt) {
    {
      if (kv_->shared() && TxnScope::Current(this) == nullptr) {
        if (absl::Status p = events_.Prepare(); !p.ok()) return p;
      }
      TxnScope scope(this, kv_);
      auto r = fn();
      absl::Status s;
      if constexpr (std::is_same_v<decltype(r), absl::Status>) {
        s = r;
      } else {
        s = r.status();
      }
      if (!IsConflict(s) || scope.joined() || attempt + 1 >= kAttempts) return r;
    }
    txn_retries_->Inc();
    BackoffAfterConflict(attempt);
  }
}

}  // namespace kelp::filer
