// FakeFiler: an in-memory MetaClient with the filer's semantics as the mount relies on them
// (inode-keyed namespace, stable readdir cookies, chunk records with seqs, inline data,
// orphans kept while open by a session, an event stream). For unit tests and kelp_fake_mount;
// not a reference implementation of the filer.
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "mount/client/meta_client.h"

namespace kelp::mount {

class FakeFiler : public MetaClient {
 public:
  FakeFiler();

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
  absl::Status KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes, bool reattach) override;
  absl::Status Open(std::string_view session, uint64_t ino) override;
  absl::Status Release(std::string_view session, uint64_t ino) override;
  absl::StatusOr<cluster::AssignResponse> Assign(uint32_t count, std::string_view replication,
                                                 std::string_view collection) override;
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const std::vector<uint32_t>& volume_ids) override;
  absl::StatusOr<std::unique_ptr<EventStream>> Subscribe(uint64_t from_seq, std::string_view path_prefix) override;

  // Fault injection: every call fails UNAVAILABLE while set.
  std::atomic<bool> down{false};
  std::atomic<size_t> calls{0};
  std::atomic<size_t> commits{0};
  std::atomic<size_t> inline_writes{0};
  std::atomic<size_t> synced_commits{0};
  std::atomic<size_t> fsyncs{0};  // successful Fsync calls
  bool HasInode(uint64_t ino) const;

 private:
  struct Node {
    Attr attr;
    // Directories: name -> (ino, cookie), and cookie -> name for ordered listing.
    std::map<std::string, std::pair<uint64_t, uint64_t>, std::less<>> names;
    std::map<uint64_t, std::string> by_cookie;
    uint64_t next_cookie = 1;
    std::vector<filer::Chunk> chunks;
    std::string inline_data;
    std::map<std::string, std::string, std::less<>> xattrs;
  };
  class Stream;

  absl::Status Check();
  Node* Find(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Node*> Dir(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(Node* n, bool mtime) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddName(Node* dir, const std::string& name, uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveName(Node* dir, const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLink(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(filer::EventKind kind, uint64_t ino, uint64_t parent, const std::string& name, uint64_t new_parent = 0,
            const std::string& new_name = "") ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Attr NewAttr(uint32_t mode, uint32_t uid, uint32_t gid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  std::condition_variable events_cv_;
  std::map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> open_ ABSL_GUARDED_BY(mu_);  // ino -> opens over all sessions
  std::set<std::string> sessions_ ABSL_GUARDED_BY(mu_);
  std::deque<filer::Event> events_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ino_ ABSL_GUARDED_BY(mu_) = 2;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_event_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kelp::mount
