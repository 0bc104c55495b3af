// The client of the filer's metadata API (proto/filer.proto over shared/rpc, method numbers in
// filer_methods.h): the one the mount, filer.fsck, kelp benchmark and the tests use. Every call
// returns absl::Status / StatusOr carrying the filer's errno, so a FUSE edge can answer exactly
// ENOTEMPTY, EXDEV... A filer that cannot be reached or answers too late comes back as
// UNAVAILABLE / DEADLINE_EXCEEDED.
//
// All calls share one connection (shared/rpc/client.h: a call costs one round trip and, when
// one thread waits, one thread switch); Subscribe opens a connection of its own. A call that
// only reads is sent again once on a fresh connection if the first one failed; a mutation is
// not (it may have been applied).
//
// Several filers sharing one store ("a:8888,b:8888", docs/filer-stores.md): calls go to one
// of them at a time, the first at the start. When it cannot be reached the client moves to
// the next one in the list and stays there: a call that never reached the filer (its
// connection could not be made) is sent to the next filer, whatever it is; a read whose
// connection failed under it is sent again to the next; a mutation whose connection failed
// under it is not (it may have been applied) and returns UNAVAILABLE, and the next call goes
// to the next filer; so does the call after one that got no answer in time. Every filer answers every request, and sessions, opens and the event log
// live in the store, so moving loses nothing. With one address nothing of this applies.
//
// Durability bookkeeping: fsync(2) makes durable what this client changed. The client counts
// its mutating calls and how many of them the last WAL sync (Fsync, or a commit with sync)
// covered, so Fsync with nothing owed costs no round trip and no device flush (SyncOwed).
//
// Thread-safe: one FilerClient serves every thread. An EventStream is read by one thread;
// Cancel() may be called from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/client/filer_methods.h"
#include "proto/cluster.pb.h"
#include "proto/filer.pb.h"
#include "shared/metrics.h"
#include "shared/mutex.h"
#include "shared/rpc/client.h"

namespace kelp::filer {

struct FilerClientOptions {
  // Deadline of each call. Default: 30 s.
  std::chrono::milliseconds rpc_timeout{30'000};
  // Time allowed to connect to the filer, within a call's deadline. Default: 3 s.
  std::chrono::milliseconds connect_timeout{3'000};
  // Largest reply accepted (GetChunks of a file with very many chunks). Default: 256 MiB.
  size_t max_receive_bytes = 256 << 20;
  // Entries asked for per ReadDir page when a listing has no limit. Default: 4096.
  uint32_t readdir_page = 4096;
  // How long a caller alone on the connection polls for a quick reply before it sleeps
  // (rpc::Channel::Options::reply_poll). Default: 0 = never poll.
  std::chrono::microseconds reply_poll{0};
  // Labels the client's metrics (kelp_filer_client_calls_total{client=...,method=...} and
  // kelp_filer_client_fsyncs_total{client=...,result=sent|skipped}). Default: "client".
  std::string metrics_label = "client";
};

class FilerClient {
 public:
  // filer: "host:port" of the filer's HTTP port, or several, comma-separated, of filers
  // sharing one store. Connects on first use.
  explicit FilerClient(std::string filer, FilerClientOptions options = {});
  ~FilerClient();
  FilerClient(const FilerClient&) = delete;
  FilerClient& operator=(const FilerClient&) = delete;

  // Connects now (to the first filer of the list that answers); UNAVAILABLE with a one-line
  // message if none is there in time.
  absl::Status Connect(std::chrono::milliseconds timeout);
  // The filer calls go to now.
  const std::string& filer() const { return channels_[current_.load()]->address(); }
  // How many times the client moved to another filer of its list.
  uint64_t failovers() const { return failovers_.load(); }

  // ---- Reads ----
  absl::StatusOr<Attr> Lookup(uint64_t parent, std::string_view name);
  absl::StatusOr<Attr> GetAttr(uint64_t ino);
  absl::StatusOr<Attr> ResolvePath(std::string_view path);
  // One page of entries after cookie (0 = from the start): at most limit (0 = the filer's
  // page size); resp.eof() says whether the directory ends there.
  absl::StatusOr<ReadDirResponse> ReadDirPage(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs);
  // Streams entries after cookie to fn, page by page, until fn returns false, limit entries
  // were delivered (0 = all) or the listing ends. Memory is bounded by one page.
  absl::Status ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                       const std::function<bool(DirEntry&&)>& fn);

  // ---- Namespace ----
  // dir_after (may be null) receives the directory's attributes after the change when the
  // filer sends them (left untouched, ino 0, when it does not).
  absl::StatusOr<Attr> Create(const CreateRequest& req, Attr* dir_after = nullptr);
  absl::StatusOr<Attr> Mkdir(uint64_t parent, std::string_view name, uint32_t mode, uint32_t uid, uint32_t gid,
                             Attr* dir_after = nullptr);
  absl::StatusOr<Attr> Symlink(const SymlinkRequest& req, Attr* dir_after = nullptr);
  absl::StatusOr<Attr> Symlink(uint64_t parent, std::string_view name, std::string_view target, uint32_t uid,
                               uint32_t gid);
  absl::StatusOr<Attr> Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, Attr* dir_after = nullptr);
  // The unlinked inode afterwards (nlink may be 0). freed (may be null) receives the blobs of
  // the inode when it went with its last name.
  absl::StatusOr<Attr> Unlink(uint64_t parent, std::string_view name, Attr* dir_after = nullptr,
                              google::protobuf::RepeatedPtrField<FreedBlob>* freed = nullptr);
  // Several unlinks in one call, each on its own: a result per request, in order (the call's
  // own status says only whether it reached the filer).
  absl::StatusOr<UnlinkBatchResponse> UnlinkBatch(const UnlinkBatchRequest& req);
  absl::Status Rmdir(uint64_t parent, std::string_view name, Attr* dir_after = nullptr);
  absl::StatusOr<RenameResponse> Rename(const RenameRequest& req);
  absl::StatusOr<RenameResponse> Rename(uint64_t parent, std::string_view name, uint64_t new_parent,
                                        std::string_view new_name, uint32_t flags);
  absl::StatusOr<Attr> SetAttr(const SetAttrRequest& req);

  // ---- Extended attributes ----
  absl::StatusOr<std::string> GetXattr(uint64_t ino, std::string_view name);
  absl::Status SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, std::string_view name);

  // ---- Data ----
  absl::StatusOr<StatFsResponse> StatFs();
  absl::StatusOr<GetChunksResponse> GetChunks(uint64_t ino);
  // A commit with sync waits while another of this client's synced commits is out; the ones
  // that waited go together next, as one CommitBatch (one handler and one WAL sync for all).
  // Alone, it goes at once, as CommitChunks.
  absl::StatusOr<CommitChunksResponse> CommitChunks(const CommitChunksRequest& req);
  // Several commits in one call, each on its own: a result per commit, in order (the call's
  // own status says only whether it reached the filer).
  absl::StatusOr<CommitBatchResponse> CommitBatch(const CommitBatchRequest& req);
  absl::StatusOr<Attr> WriteInline(const WriteInlineRequest& req);
  absl::StatusOr<Attr> WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync);
  // Makes this client's changes durable (the filer syncs its WAL), unless nothing is owed.
  absl::Status Fsync(uint64_t ino);
  // True when a WAL sync is owed: a mutation returned after the last successful sync began.
  bool SyncOwed() const { return synced_.load() < mutations_.load(); }

  // ---- Sessions ----
  absl::StatusOr<OpenSessionResponse> OpenSession(std::string_view client);
  absl::Status KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes = {},
                         bool reattach = false);
  // Counts ino open by the session; answers its attributes, with its content when asked.
  absl::StatusOr<GetChunksResponse> Open(std::string_view session, uint64_t ino, bool with_content = false);
  // freed (may be null) receives the blobs of unlinked files that went with this release.
  absl::Status Release(std::string_view session, const std::vector<uint64_t>& inodes,
                       google::protobuf::RepeatedPtrField<FreedBlob>* freed = nullptr);

  // ---- Cluster ----
  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest& req);
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const cluster::LookupVolumeRequest& req);

  // ---- Events ----
  class EventStream {
   public:
    // Blocks for the next event; false when the stream ended (then Finish() says why:
    // UNAVAILABLE when the filer went away, CANCELLED after Cancel()).
    bool Next(Event* event) { return stream_->Next(event); }
    absl::Status Finish() { return stream_->Finish(); }
    // Ends the stream from any thread; a blocked Next returns false.
    void Cancel() { stream_->Cancel(); }

   private:
    friend class FilerClient;
    explicit EventStream(std::unique_ptr<rpc::ClientStream> s) : stream_(std::move(s)) {}
    std::unique_ptr<rpc::ClientStream> stream_;
  };
  // skip_own: leave out the events of changes this client made (its calls carry its
  // client_id(); SubscribeRequest.skip_own). Its own changes' replies already said what they did.
  absl::StatusOr<std::unique_ptr<EventStream>> Subscribe(uint64_t from_seq,
                                                         std::string_view path_prefix,
                                                         std::string_view client,
                                                         bool skip_own = false);
  // The id this client names on each of its connections (Kelp-Client, docs/rpc-protocol.md):
  // random, not 0, one per FilerClient.
  uint64_t client_id() const { return client_id_; }

  // Calls made, per method (tests and metrics), and fsyncs sent or skipped.
  uint64_t calls(FilerMethod m) const;
  uint64_t fsyncs_sent() const { return fsyncs_sent_.load(); }
  // Calls sent that asked for a WAL sync (Fsync, commits with sync).
  uint64_t synced_calls() const { return synced_calls_.load(); }
  uint64_t fsyncs_skipped() const { return fsyncs_skipped_.load(); }

 private:
  // kRead: may be sent again on a fresh connection. kOnce: not again (it counts something).
  // kMutation: not again, and counted for SyncOwed.
  enum class Kind { kRead, kOnce, kMutation };
  template <typename Resp, typename Req>
  absl::StatusOr<Resp> Call(FilerMethod m, const Req& req, Kind kind);
  // A call that syncs the WAL when sync is set.
  template <typename Resp, typename Req>
  absl::StatusOr<Resp> MaybeSync(FilerMethod m, const Req& req, bool sync, bool mutates);
  void MarkSynced(uint64_t covered);
  void CountCall(FilerMethod m);
  // A synced commit waiting its turn (CommitChunks); result is set before done. Its thread
  // waits on turn, notified when its batch is done or when it is first in the queue and may
  // send. Shared, so that it is notified after commit_mu_ is let go (the woken thread then
  // finds the lock free) and still there if its thread already returned.
  struct QueuedCommit {
    const CommitChunksRequest* req = nullptr;
    absl::StatusOr<CommitChunksResponse> result = absl::UnknownError("not sent");
    bool taken = false;  // in a batch that is out
    bool done = false;
    CondVar turn;
  };
  // Sends the queued commits, as one CommitBatch when there are several, and sets their results.
  void SendCommits(const std::vector<std::shared_ptr<QueuedCommit>>& batch);
  // Moves from filer `from` to the next of the list (unless another thread moved already).
  void MoveOn(size_t from);
  // The first queued commit when fewer than kCommitsOut batches are out (to be woken), or null.
  std::shared_ptr<QueuedCommit> NextCommitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);

  const FilerClientOptions opts_;
  const uint64_t client_id_;
  // One per filer of the list; calls go to channels_[current_].
  std::vector<std::unique_ptr<rpc::Channel>> channels_;
  std::atomic<size_t> current_{0};
  std::atomic<uint64_t> failovers_{0};
  Counter* failovers_metric_ = nullptr;
  std::atomic<uint64_t> mutations_{0};
  std::atomic<uint64_t> synced_{0};
  // By method number: this client's own counts, and the process-wide metrics.
  std::unique_ptr<std::atomic<uint64_t>[]> calls_;
  std::vector<Counter*> call_metrics_;
  std::atomic<uint64_t> fsyncs_sent_{0};
  std::atomic<uint64_t> fsyncs_skipped_{0};
  std::atomic<uint64_t> synced_calls_{0};
  Counter* fsyncs_sent_metric_;
  Counter* fsyncs_skipped_metric_;
  // Synced commits: the ones waiting, oldest first, and how many calls of them are out.
  Mutex commit_mu_;
  std::deque<std::shared_ptr<QueuedCommit>> commit_queue_ ABSL_GUARDED_BY(commit_mu_);
  int commits_out_ ABSL_GUARDED_BY(commit_mu_) = 0;
  std::atomic<bool> no_commit_batch_{false};  // the filer answered CommitBatch UNIMPLEMENTED
};

}  // namespace kelp::filer
