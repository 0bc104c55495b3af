// MetaClient: the mount's view of the filer's metadata API (proto/filer.proto), one method per
// RPC, errors as absl::Status carrying the filer's errno. GrpcMetaClient is the real one;
// mount/testing/fake_filer.h is an in-memory one for tests.
//
// Thread-safety: every method may be called from any thread concurrently. Calls block for at
// most the implementation's RPC timeout; callers must not hold locks across them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/filer.pb.h"

namespace kelp::mount {

using filer::Attr;
using filer::Chunk;

// A server stream of filer events. Next() blocks until an event arrives, the stream ends
// (returns an error: UNAVAILABLE when the filer went away, CANCELLED after Cancel()).
// Cancel() may be called from another thread to unblock Next().
class EventStream {
 public:
  virtual ~EventStream() = default;
  virtual absl::StatusOr<filer::Event> Next() = 0;
  virtual void Cancel() = 0;
};

class MetaClient {
 public:
  virtual ~MetaClient() = default;

  virtual absl::StatusOr<Attr> Lookup(uint64_t parent, std::string_view name) = 0;
  virtual absl::StatusOr<Attr> GetAttr(uint64_t ino) = 0;
  // Calls fn for each entry after cookie (0 = from the start), at most limit (0 = all). fn
  // returns false to stop early.
  virtual absl::Status ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                               const std::function<bool(filer::DirEntry&&)>& fn) = 0;
  // Namespace changes: dir_after (may be null) receives the directory's attributes after the
  // change when the filer sends them, and is left untouched (ino 0) when it does not.
  virtual absl::StatusOr<Attr> Create(const filer::CreateRequest& req, Attr* dir_after) = 0;
  virtual absl::StatusOr<Attr> Symlink(const filer::SymlinkRequest& req, Attr* dir_after) = 0;
  virtual absl::StatusOr<Attr> Link(uint64_t ino, uint64_t new_parent, std::string_view new_name, Attr* dir_after) = 0;
  virtual absl::StatusOr<Attr> Unlink(uint64_t parent, std::string_view name, Attr* dir_after) = 0;
  virtual absl::Status Rmdir(uint64_t parent, std::string_view name, Attr* dir_after) = 0;
  virtual absl::StatusOr<filer::RenameResponse> Rename(const filer::RenameRequest& req) = 0;
  virtual absl::StatusOr<Attr> SetAttr(const filer::SetAttrRequest& req) = 0;
  virtual absl::StatusOr<std::string> GetXattr(uint64_t ino, std::string_view name) = 0;
  virtual absl::Status SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                                uint32_t flags) = 0;
  virtual absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) = 0;
  virtual absl::Status RemoveXattr(uint64_t ino, std::string_view name) = 0;
  virtual absl::StatusOr<filer::StatFsResponse> StatFs() = 0;
  virtual absl::StatusOr<filer::GetChunksResponse> GetChunks(uint64_t ino) = 0;
  virtual absl::StatusOr<filer::CommitChunksResponse> CommitChunks(const filer::CommitChunksRequest& req) = 0;
  virtual absl::StatusOr<Attr> WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns, bool sync) = 0;
  virtual absl::Status Fsync(uint64_t ino) = 0;
  virtual absl::StatusOr<filer::OpenSessionResponse> OpenSession(std::string_view client) = 0;
  // reattach: the filer lost the session; recreate it under this id holding open_inodes.
  virtual absl::Status KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes,
                                 bool reattach) = 0;
  virtual absl::Status Open(std::string_view session, uint64_t ino) = 0;
  virtual absl::Status Release(std::string_view session, uint64_t ino) = 0;
  virtual absl::StatusOr<cluster::AssignResponse> Assign(uint32_t count, std::string_view replication,
                                                         std::string_view collection) = 0;
  virtual absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(const std::vector<uint32_t>& volume_ids) = 0;
  virtual absl::StatusOr<std::unique_ptr<EventStream>> Subscribe(uint64_t from_seq, std::string_view path_prefix) = 0;
};

}  // namespace kelp::mount
