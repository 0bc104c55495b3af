// SyncTrackingMetaClient: a MetaClient that forwards every call and skips Fsync when nothing
// this mount changed on the filer can still be outside its synced WAL.
//
// fsync(2) makes durable what this mount wrote: its uploads (FileData syncs those volumes) and
// its metadata changes. Every metadata change is a filer RPC, so counting the mutating RPCs
// that returned and remembering how many of them the last successful WAL sync covered tells
// whether a sync is still owed. sysbench, databases and editors fsync files that did not change
// since the previous fsync; without this each of those cost a round trip and a device flush.
// Changes made by other clients (another mount, the HTTP API) are theirs to fsync.
//
// A mutation counts once its RPC returns, whatever the result (a failed one may have been
// applied before the error reached us). A sync (Fsync, or CommitChunks / WriteInline with sync)
// covers every mutation counted before it started, and its own change.
//
// Thread-safety: every method may be called from any thread concurrently (two atomics).
#pragma once

#include <atomic>
#include <cstdint>

#include "mount/client/meta_client.h"
#include "shared/metrics.h"

namespace kelp::mount {

class SyncTrackingMetaClient : public MetaClient {
 public:
  explicit SyncTrackingMetaClient(MetaClient* inner);

  // True when a WAL sync is owed: a mutation returned after the last successful sync began.
  bool SyncOwed() const { return synced_.load() < mutations_.load(); }
  // Fsync RPCs sent / skipped (nothing owed), for tests and metrics.
  uint64_t fsyncs_sent() const { return fsyncs_sent_; }
  uint64_t fsyncs_skipped() const { return fsyncs_skipped_; }

  absl::StatusOr<Attr> Lookup(uint64_t parent, std::string_view name) override;
  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  absl::Status ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                       const std::function<bool(filer::DirEntry&&)>& fn) override;
  absl::StatusOr<Attr> Create(const filer::CreateRequest& req, Attr* dir_after) override;
  absl::StatusOr<Attr> Symlink(const filer::SymlinkRequest& req, Attr* dir_after) override;
  absl::StatusOr<Attr> Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, Attr* dir_after) override;
  absl::StatusOr<Attr> Unlink(uint64_t parent, std::string_view name, Attr* dir_after) override;
  absl::Status Rmdir(uint64_t parent, std::string_view name, Attr* dir_after) override;
  absl::StatusOr<filer::RenameResponse> Rename(const filer::RenameRequest& req) override;
  absl::StatusOr<Attr> SetAttr(const filer::SetAttrRequest& req) override;
  absl::StatusOr<std::string> GetXattr(uint64_t ino, std::string_view name) override;
  absl::Status SetXattr(uint64_t ino, std::string_view name, std::string_view value, uint32_t flags) override;
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) override;
  absl::Status RemoveXattr(uint64_t ino, std::string_view name) override;
  absl::StatusOr<filer::StatFsResponse> StatFs() override;
  absl::StatusOr<filer::GetChunksResponse> GetChunks(uint64_t ino) override;
  absl::StatusOr<filer::CommitChunksResponse> CommitChunks(const filer::CommitChunksRequest& req) override;
  absl::StatusOr<Attr> WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync) override;
  absl::Status Fsync(uint64_t ino) override;
  absl::StatusOr<filer::OpenSessionResponse> OpenSession(std::string_view client) override;
  absl::Status KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes,
                         bool reattach) override;
  absl::Status Open(std::string_view session, uint64_t ino) override;
  absl::Status Release(std::string_view session, uint64_t ino) override;
  absl::StatusOr<cluster::AssignResponse> Assign(uint32_t count, std::string_view replication,
                                                 std::string_view collection) override;
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const std::vector<uint32_t>& volume_ids) override;
  absl::StatusOr<std::unique_ptr<EventStream>> Subscribe(uint64_t from_seq, std::string_view path_prefix) override;

 private:
  // Runs a mutating call and counts it.
  template <typename Call>
  auto Mutate(Call&& call) {
    auto r = call();
    mutations_.fetch_add(1);
    return r;
  }
  // Runs a call that syncs the WAL when sync is set (and mutates, unless it is a bare Fsync).
  template <typename Call>
  auto MaybeSync(bool sync, bool mutates, Call&& call) {
    if (!sync) return mutates ? Mutate(call) : call();
    uint64_t covered = mutations_.load();
    auto r = call();
    if (r.ok()) {
      MarkSynced(covered);
    } else if (mutates) {
      mutations_.fetch_add(1);  // maybe applied, not known to be synced
    }
    return r;
  }
  void MarkSynced(uint64_t covered);

  MetaClient* const inner_;
  std::atomic<uint64_t> mutations_{0};
  std::atomic<uint64_t> synced_{0};
  std::atomic<uint64_t> fsyncs_sent_{0};
  std::atomic<uint64_t> fsyncs_skipped_{0};
  Counter* const sent_metric_;     // the same two, process-wide, on /metrics
  Counter* const skipped_metric_;
};

}  // namespace kelp::mount
