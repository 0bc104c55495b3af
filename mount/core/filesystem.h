// Filesystem: the mount's core, in filer inode numbers and absl::Status, with no FUSE types.
// The FUSE adapter (mount/fuse/) turns each request into one call here and the result into one
// reply. It owns the caches (MetaCache), the inode table, open file and directory handles, the
// write path (FileData, WriteBudget, upload pool), the read path (ChunkFetcher), the filer
// session and the event subscriber.
//
// Threads: Start/Stop from the owner (main) thread; every other method from any FUSE worker
// thread concurrently. Filesystem-wide state sits in the component objects, each with its own
// lock; no lock is held across an RPC. Lock order where two are nested: DirHandle::mu before
// nothing else; FileData::mu_ and the component mutexes are leaves.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "mount/core/chunk_fetcher.h"
#include "mount/core/clients.h"
#include "mount/core/dir_listings.h"
#include "mount/core/file_data.h"
#include "mount/core/filer_session.h"
#include "mount/core/inode_table.h"
#include "mount/core/meta_cache.h"
#include "mount/core/pending_removes.h"
#include "mount/core/read_pattern.h"
#include "mount/core/write_budget.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/thread_pool.h"

namespace kelp::mount {

class EventSubscriber;

// Tells the kernel to forget what it cached. Implemented by the FUSE adapter with
// fuse_lowlevel_notify_inval_*; called only from the event subscriber thread, holding no lock.
class KernelNotifier {
 public:
  virtual ~KernelNotifier() = default;
  // data: drop cached pages too, not only attributes.
  virtual void InvalidateInode(uint64_t ino, bool data) = 0;
  virtual void InvalidateEntry(uint64_t parent, std::string_view name) = 0;
};

struct FsOptions {
  std::string filer_path = "/";
  std::chrono::nanoseconds attr_ttl = std::chrono::seconds(1);
  std::chrono::nanoseconds entry_ttl = std::chrono::seconds(1);
  uint32_t umask = 0;  // cleared from new files' modes on top of the caller's umask
  bool read_only = false;
  uint64_t chunk_size = 4 << 20;
  uint64_t write_buffer = 256 << 20;
  int concurrent_writers = 8;
  uint64_t read_ahead = 4 << 20;
  uint32_t max_inline = 4096;
  // An fsync of at most this many dirty bytes of a file journals them in its commit (one
  // device flush, at the filer); 0 = never (-journalMaxKB).
  uint64_t journal_max = 256 << 10;
  // Journaled bytes the mount's files keep in memory to read back (-journalMemoryMB); past
  // it they go to the read cache.
  uint64_t journal_memory = 256 << 20;
  // An fsync that commits new data starts durable commits of other open files whose dirty
  // data an fsync would journal, up to this many bytes in all (-syncAheadKB); 0 = never.
  uint64_t sync_ahead = 1 << 20;
  // An unlink of a file with one link that is not open here is answered at once and sent to
  // the filer in the background, at most this many at a time (-unlinkBehind); what depends on
  // it waits for it (PendingRemoves). 0 = every unlink waits for the filer.
  size_t unlink_behind = 64;
  // Blobs of closed files uploaded without fsync are synced on their volume servers about
  // this long after the close (VolumeSet::StartWriteback); 0 = only by the next fsync.
  std::chrono::milliseconds writeback_interval{1000};
  bool subscribe = true;  // run the event subscriber
  std::string client_name = "kelp mount";
};

// The caller of a request (from fuse_req_ctx).
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t umask = 0;
};

struct OpenResult {
  uint64_t fh = 0;
  bool keep_cache = false;
  Attr attr;
};

class Filesystem {
 public:
  // Commits SyncAhead runs at once: about what the filer's write group takes in one WAL sync.
  static constexpr size_t kSyncAheadThreads = 8;
  // Unlinks behind sent in one UnlinkBatch call at most.
  static constexpr size_t kUnlinkBatch = 64;
  // meta and blobs must outlive this; cache may be null.
  Filesystem(FilerClient* meta, BlobStore* blobs, ChunkCache* cache, FsOptions options);
  ~Filesystem();
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  // Resolves filer_path to the root inode and opens the filer session.
  absl::Status Start();
  // Starts the event subscriber (kernel notifications go to notifier, may be null).
  void StartEvents(KernelNotifier* notifier);
  // Uploads and commits every file's dirty data, and waits for the unlinks behind. Returns the
  // first error.
  absl::Status FlushAll();
  // FlushAll, stop the subscriber and the upload pool, close the session. Idempotent.
  void Stop();
  // The filer event sequence this mount's caches have caught up with (0: none yet).
  uint64_t last_event_seq() const;
  // Whether work the mount does on its own is queued or running: unlinks behind, uploads,
  // commits ahead, read-ahead. The FUSE loop then sleeps at once rather than busy-polls
  // (DeviceLoop): that work, and the filer's for it, wants the CPUs.
  bool BackgroundBusy() const;

  uint64_t root() const { return root_; }
  // Bytes written and not yet uploaded (held against -writeBufferSizeMB).
  uint64_t dirty_bytes() const { return budget_.used(); }
  MetaCache& meta_cache() { return cache_; }
  DirListings& listings() { return listings_; }
  InodeTable& inodes() { return inodes_; }
  FilerSession& session() { return session_; }

  // ---- Names and attributes (fs_namespace.cc) ----
  // Lookup, MakeNode, Symlink, Link and Create count one kernel lookup on success.
  absl::StatusOr<Attr> Lookup(uint64_t parent, std::string_view name);
  void NoteLookup(uint64_t ino) { inodes_.AddLookup(ino); }
  void Forget(uint64_t ino, uint64_t n) { inodes_.Forget(ino, n); }
  absl::StatusOr<Attr> GetAttr(uint64_t ino);
  // req.ino is ignored; ino is used. A size change flushes the file first.
  absl::StatusOr<Attr> SetAttr(uint64_t ino, filer::SetAttrRequest req);
  absl::StatusOr<std::string> ReadLink(uint64_t ino);
  // mode carries the S_IFMT bits (S_IFDIR for mkdir).
  absl::StatusOr<Attr> MakeNode(uint64_t parent, std::string_view name, uint32_t mode, uint64_t rdev,
                                const Caller& caller);
  absl::StatusOr<Attr> Symlink(uint64_t parent, std::string_view name, std::string_view target, const Caller& caller);
  absl::StatusOr<Attr> Link(uint64_t ino, uint64_t new_parent, std::string_view new_name);
  // With FsOptions::unlink_behind, the unlink of a closed file with one link returns before the
  // filer has it (see PendingRemoves for what waits for it).
  absl::Status Unlink(uint64_t parent, std::string_view name);
  absl::Status Rmdir(uint64_t parent, std::string_view name);
  absl::Status Rename(uint64_t parent, std::string_view name, uint64_t new_parent, std::string_view new_name,
                      uint32_t flags);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, std::string_view name);
  absl::Status SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, std::string_view name);
  absl::StatusOr<filer::StatFsResponse> StatFs();

  // ---- Files (fs_files.cc) ----
  absl::StatusOr<OpenResult> Open(uint64_t ino, int flags);
  absl::StatusOr<OpenResult> Create(uint64_t parent, std::string_view name, uint32_t mode, int flags,
                                    const Caller& caller);
  absl::StatusOr<size_t> Read(uint64_t fh, uint64_t offset, size_t len, char* dst);
  absl::Status Write(uint64_t fh, uint64_t offset, std::string_view data);
  absl::Status Flush(uint64_t fh);
  absl::Status Fsync(uint64_t fh, bool datasync);
  absl::Status Release(uint64_t fh);

  // ---- Directories (fs_dirs.cc) ----
  absl::StatusOr<uint64_t> OpenDir(uint64_t ino);
  // Entry handed to a ReadDir callback. next_offset is the offset to resume after it.
  struct DirItem {
    std::string name;
    uint64_t ino = 0;
    uint32_t type = 0;  // S_IFMT bits
    uint64_t next_offset = 0;
    const Attr* attr = nullptr;  // with plus, except for "." and ".."
  };
  // Lists entries after offset (0 = from the start: ".", "..", then the filer's entries),
  // calling fn until it returns false (buffer full) or the directory ends.
  absl::Status ReadDir(uint64_t dh, uint64_t offset, bool plus, const std::function<bool(const DirItem&)>& fn);
  void ReleaseDir(uint64_t dh);
  // Namespace changes are committed when their RPC returns (an unlink behind, when it landed);
  // this waits for the unlinks behind in ino and makes them durable (the filer syncs its WAL).
  absl::Status FsyncDir(uint64_t ino);

  // ---- Events (event_subscriber.cc calls these) ----
  void OnEvent(const filer::Event& ev, KernelNotifier* notifier);
  void OnReset(KernelNotifier* notifier);

 private:
  struct FileHandle {
    uint64_t ino = 0;
    std::shared_ptr<FileData> file;
    int flags = 0;
    Mutex mu;  // a leaf: nothing is taken under it
    ReadPattern pattern ABSL_GUARDED_BY(mu);
  };
  struct DirHandle;

  std::shared_ptr<FileHandle> Handle(uint64_t fh);
  uint64_t AddHandle(std::shared_ptr<FileHandle> h);
  // Attributes as this mount sees them: the filer's plus unflushed writes.
  Attr Overlay(Attr a);
  void Remember(const Attr& a);  // caches attrs and tells an open FileData
  // After a namespace change in dir: caches its new attributes when the filer sent them
  // (after.ino() == dir), so the kernel's next GETATTR of it (permission checks) costs no RPC;
  // else forgets the stale ones.
  void DirChanged(uint64_t dir, const Attr& after);
  // A name was added to (removed from) dir by a change this mount made; dir_after is the
  // directory's attributes after it when the filer sent them (else the listing is forgotten).
  void ListingAdded(uint64_t dir, const Attr& dir_after, std::string_view name, uint64_t ino);
  void ListingRemoved(uint64_t dir, const Attr& dir_after, std::string_view name);
  // A rename (own reply or event) in the directory listings.
  void ListingRenamed(uint64_t parent, uint64_t parent_version, std::string_view name,
                      uint64_t new_parent, uint64_t new_parent_version, std::string_view new_name,
                      uint64_t ino, bool exchange);
  void OnWritePressure();
  // Unlinks behind (FsOptions::unlink_behind): the inode of (parent, name) when an unlink of it
  // may be answered before the filer has it, else 0.
  uint64_t UnlinkBehindIno(uint64_t parent, std::string_view name);
  // The filer unlinked (parent, name) (this mount's unlink, answered or behind): caches,
  // listing and the file's own attributes follow.
  void Unlinked(uint64_t parent, std::string_view name, const Attr& unlinked, const Attr& dir_after);
  using NameInDir = std::pair<uint64_t, std::string>;
  // Queues an unlink behind for unlink_thread_; false once that thread is stopping.
  bool QueueUnlinkBehind(uint64_t parent, std::string_view name);
  // unlink_thread_: sends what is queued, up to kUnlinkBatch in one call, until stopped and
  // drained.
  void SendUnlinksBehind();
  // One batch: sent (again, for a while, while the filer cannot be reached) and its answers
  // applied.
  void SendUnlinkBatch(const std::vector<NameInDir>& batch);
  // Applies the filer's answer to one unlink behind: a done unlink's attributes, or the name
  // shown again.
  void FinishUnlinkBehind(uint64_t parent, const std::string& name, const absl::StatusOr<Attr>& unlinked,
                          const Attr& dir_after);
  void StopUnlinksBehind();
  // After an fsync of `synced` that committed new data: durable commits, in the background,
  // of other open files' small dirty data (FsOptions::sync_ahead).
  void SyncAhead(const FileData* synced);
  absl::Status CheckWritable() const;
  // (mode, gid) of a directory, for set-group-ID inheritance.
  std::optional<std::pair<uint32_t, uint32_t>> ParentModeGid(uint64_t parent);

  FilerClient* const meta_;
  BlobStore* const blobs_;
  const FsOptions opts_;
  uint64_t root_ = 1;

  MetaCache cache_;
  // Directories whose every name is known (negative lookups answered here); kept only while the
  // event stream can keep them current.
  DirListings listings_;
  const bool track_listings_;
  WriteBudget budget_;
  std::unique_ptr<ThreadPool> upload_pool_;
  std::unique_ptr<ThreadPool> prefetch_pool_;
  std::unique_ptr<ThreadPool> sync_ahead_pool_;
  Counter* sync_ahead_files_;
  PendingRemoves removes_;
  Mutex unlink_mu_;
  CondVar unlink_cv_;
  std::deque<NameInDir> unlink_queue_ ABSL_GUARDED_BY(unlink_mu_);
  bool unlink_stop_ ABSL_GUARDED_BY(unlink_mu_) = false;
  std::thread unlink_thread_;
  Counter* unlinks_behind_;
  Counter* unlinks_behind_failed_;
  std::unique_ptr<ChunkFetcher> fetcher_;
  FileContext file_ctx_;
  // After what a FileData uses (the context, the fetcher, the budget): files still open when
  // the Filesystem goes are destroyed before those.
  InodeTable inodes_;
  FilerSession session_;
  std::unique_ptr<EventSubscriber> subscriber_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> pressure_running_{false};
  std::atomic<int> fsyncs_running_{0};  // Fsync calls in progress (not the commits ahead)

  // The locks of the Filesystem itself are leaves (nothing is taken under them); the order of
  // the mount's locks as a whole is written at DirHandle (fs_dirs.cc), the one held over others.
  Mutex handles_mu_;
  uint64_t next_handle_ ABSL_GUARDED_BY(handles_mu_) = 1;
  std::map<uint64_t, std::shared_ptr<FileHandle>> handles_ ABSL_GUARDED_BY(handles_mu_);
  std::map<uint64_t, std::shared_ptr<DirHandle>> dirs_ ABSL_GUARDED_BY(handles_mu_);
};

}  // namespace kelp::mount
