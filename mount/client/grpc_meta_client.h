// GrpcMetaClient: MetaClient over the filer's gRPC Filer service. Each unary call has a
// deadline (rpc_timeout_ms), so a filer that is gone turns into UNAVAILABLE/DEADLINE_EXCEEDED
// (EIO at the FUSE edge), never a hang.
//
// Thread-safety: every method may be called from any thread concurrently (one shared channel).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "mount/client/meta_client.h"
#include "proto/filer.grpc.pb.h"

namespace kelp::mount {

class GrpcMetaClient : public MetaClient {
 public:
  // grpc_address: "host:port" of the filer's gRPC port.
  GrpcMetaClient(const std::string& grpc_address, int rpc_timeout_ms);

  // Waits up to timeout_ms for the channel to connect; UNAVAILABLE with a one-line message if
  // it does not.
  absl::Status WaitConnected(int timeout_ms);

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

 private:
  void Prepare(grpc::ClientContext* ctx) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<filer::Filer::Stub> stub_;
  const int rpc_timeout_ms_;
};

}  // namespace kelp::mount
