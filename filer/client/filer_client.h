// A synchronous C++ client of the Filer gRPC service (proto/filer.proto), for the mount and
// tools. Every call returns absl::Status / StatusOr carrying the filer's errno
// (shared/grpc_status.h FromGrpcStatus), so a FUSE edge can answer exactly ENOTEMPTY, EXDEV...
// Network failures come back as UNAVAILABLE / DEADLINE_EXCEEDED (errno EIO-ish: EAGAIN,
// ETIMEDOUT).
//
// Thread-safe: one FilerClient (one channel) serves every thread. An EventStream is used by
// one thread, except Cancel(), which any thread may call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "proto/filer.grpc.pb.h"

namespace kelp::filer {

struct FilerClientOptions {
  // Deadline of each unary call. Default: 30 s.
  std::chrono::milliseconds rpc_timeout{30'000};
  // Deadline of a whole ReadDir stream; 0 = none (a listing of millions of entries may take
  // long). Default: 0.
  std::chrono::milliseconds readdir_timeout{0};
  // Largest message accepted from the filer (GetChunks of a file with very many chunks).
  // Default: 256 MiB.
  int max_receive_bytes = 256 << 20;
};

class FilerClient {
 public:
  explicit FilerClient(std::shared_ptr<grpc::Channel> channel, FilerClientOptions options = {});
  // Connects (lazily, insecure) to "host:port" — the filer's gRPC port.
  static std::unique_ptr<FilerClient> Connect(const std::string& grpc_address,
                                              FilerClientOptions options = {});

  absl::StatusOr<Attr> Lookup(uint64_t parent, std::string_view name);
  absl::StatusOr<Attr> GetAttr(uint64_t ino);
  absl::StatusOr<Attr> ResolvePath(std::string_view path);
  // Streams entries after cookie (0 = start) to fn until it returns false or the listing
  // ends. limit 0 = all. Memory is bounded by one stream message.
  absl::Status ReadDir(uint64_t ino, uint64_t cookie, uint32_t limit, bool with_attrs,
                       const std::function<bool(const DirEntry&)>& fn);

  absl::StatusOr<Attr> Create(const CreateRequest& req);
  absl::StatusOr<Attr> Mkdir(uint64_t parent, std::string_view name, uint32_t mode, uint32_t uid,
                             uint32_t gid);
  absl::StatusOr<Attr> Symlink(uint64_t parent, std::string_view name, std::string_view target,
                               uint32_t uid, uint32_t gid);
  absl::StatusOr<Attr> Link(uint64_t ino, uint64_t new_parent, std::string_view new_name);
  absl::StatusOr<Attr> Unlink(uint64_t parent, std::string_view name);
  absl::Status Rmdir(uint64_t parent, std::string_view name);
  absl::StatusOr<RenameResponse> Rename(uint64_t parent, std::string_view name,
                                        uint64_t new_parent, std::string_view new_name,
                                        uint32_t flags);
  absl::StatusOr<Attr> SetAttr(const SetAttrRequest& req);

  absl::StatusOr<std::string> GetXattr(uint64_t ino, std::string_view name);
  absl::Status SetXattr(uint64_t ino, std::string_view name, std::string_view value,
                        uint32_t flags);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, std::string_view name);

  absl::StatusOr<StatFsResponse> StatFs();
  absl::StatusOr<GetChunksResponse> GetChunks(uint64_t ino);
  absl::StatusOr<CommitChunksResponse> CommitChunks(const CommitChunksRequest& req);
  absl::StatusOr<Attr> WriteInline(uint64_t ino, std::string_view data, int64_t mtime_ns,
                                   bool sync);
  absl::Status Fsync(uint64_t ino);

  absl::StatusOr<OpenSessionResponse> OpenSession(std::string_view client);
  absl::Status KeepAlive(std::string_view session, const std::vector<uint64_t>& open_inodes = {},
                         bool reattach = false);
  absl::Status Open(std::string_view session, uint64_t ino);
  absl::Status Release(std::string_view session, uint64_t ino);

  absl::StatusOr<cluster::AssignResponse> Assign(const cluster::AssignRequest& req);
  absl::StatusOr<cluster::LookupVolumeResponse> LookupVolume(
      const cluster::LookupVolumeRequest& req);

  // A live event stream (Subscribe).
  class EventStream {
   public:
    ~EventStream();
    // Blocks for the next event; false when the stream ended (then call Finish()).
    bool Next(Event* event);
    // Why the stream ended. Call once Next returned false.
    absl::Status Finish();
    // Ends the stream from any thread; a blocked Next returns false.
    void Cancel() { ctx_.TryCancel(); }

   private:
    friend class FilerClient;
    EventStream() = default;
    grpc::ClientContext ctx_;
    std::unique_ptr<grpc::ClientReader<Event>> reader_;
    bool finished_ = false;
  };
  std::unique_ptr<EventStream> Subscribe(uint64_t from_seq, std::string_view path_prefix,
                                         std::string_view client);

 private:
  void Prepare(grpc::ClientContext* ctx) const;
  template <typename Resp, typename Req>
  absl::StatusOr<Resp> Unary(
      grpc::Status (Filer::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
      const Req& req);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Filer::Stub> stub_;
  const FilerClientOptions opts_;
};

}  // namespace kelp::filer
