// The Filer gRPC service (proto/filer.proto) as a thin adapter over FilerService: each
// handler converts the request, calls the core, and converts the absl::Status once
// (shared/grpc_status.h, which carries the errno). Handlers never throw (GuardedCall).
// Each method's latency and failures are metrics (kelp_filer_rpc_seconds{method},
// kelp_filer_rpc_errors_total{method}).
//
// Register it on the filer process's server:
//   FilerGrpcService svc(&filer_service);
//   builder.RegisterService(&svc);
// and at shutdown call svc.Shutdown() before grpc::Server::Shutdown(), so streaming calls
// (Subscribe) end promptly, then FilerService::Stop().
//
// Thread-safe: gRPC calls the handlers from its own threads concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "filer/core/filer_service.h"
#include "proto/filer.grpc.pb.h"
#include "shared/metrics.h"

namespace kelp::filer {

struct FilerGrpcOptions {
  // Entries per ReadDir stream message. Default: 512.
  size_t readdir_batch = 512;
  // Events per Subscribe stream message batch read from the log. Default: 256.
  size_t subscribe_batch = 256;
  // How often a waiting Subscribe handler checks that its client is still there and the
  // service is not shutting down. Default: 500 ms.
  std::chrono::milliseconds subscribe_poll{500};
};

class FilerGrpcService final : public Filer::Service {
 public:
  // core is not owned and must outlive this service.
  explicit FilerGrpcService(FilerService* core, FilerGrpcOptions options = {});

  // Makes streaming handlers return (within subscribe_poll); unary calls are unaffected.
  void Shutdown() { shutdown_ = true; }

  grpc::Status Lookup(grpc::ServerContext*, const LookupRequest*, AttrResponse*) override;
  grpc::Status GetAttr(grpc::ServerContext*, const GetAttrRequest*, AttrResponse*) override;
  grpc::Status ReadDir(grpc::ServerContext*, const ReadDirRequest*,
                       grpc::ServerWriter<ReadDirResponse>*) override;
  grpc::Status Create(grpc::ServerContext*, const CreateRequest*, AttrResponse*) override;
  grpc::Status Symlink(grpc::ServerContext*, const SymlinkRequest*, AttrResponse*) override;
  grpc::Status Link(grpc::ServerContext*, const LinkRequest*, AttrResponse*) override;
  grpc::Status Unlink(grpc::ServerContext*, const UnlinkRequest*, UnlinkResponse*) override;
  grpc::Status Rmdir(grpc::ServerContext*, const UnlinkRequest*, RmdirResponse*) override;
  grpc::Status Rename(grpc::ServerContext*, const RenameRequest*, RenameResponse*) override;
  grpc::Status SetAttr(grpc::ServerContext*, const SetAttrRequest*, AttrResponse*) override;
  grpc::Status GetXattr(grpc::ServerContext*, const XattrRequest*, XattrResponse*) override;
  grpc::Status SetXattr(grpc::ServerContext*, const XattrRequest*, Empty*) override;
  grpc::Status ListXattr(grpc::ServerContext*, const XattrRequest*, XattrResponse*) override;
  grpc::Status RemoveXattr(grpc::ServerContext*, const XattrRequest*, Empty*) override;
  grpc::Status StatFs(grpc::ServerContext*, const StatFsRequest*, StatFsResponse*) override;
  grpc::Status GetChunks(grpc::ServerContext*, const GetChunksRequest*,
                         GetChunksResponse*) override;
  grpc::Status CommitChunks(grpc::ServerContext*, const CommitChunksRequest*,
                            CommitChunksResponse*) override;
  grpc::Status WriteInline(grpc::ServerContext*, const WriteInlineRequest*,
                           AttrResponse*) override;
  grpc::Status Fsync(grpc::ServerContext*, const FsyncRequest*, Empty*) override;
  grpc::Status OpenSession(grpc::ServerContext*, const OpenSessionRequest*,
                           OpenSessionResponse*) override;
  grpc::Status KeepAlive(grpc::ServerContext*, const KeepAliveRequest*, Empty*) override;
  grpc::Status Open(grpc::ServerContext*, const OpenRequest*, Empty*) override;
  grpc::Status Release(grpc::ServerContext*, const OpenRequest*, Empty*) override;
  grpc::Status Assign(grpc::ServerContext*, const cluster::AssignRequest*,
                      cluster::AssignResponse*) override;
  grpc::Status LookupVolume(grpc::ServerContext*, const cluster::LookupVolumeRequest*,
                            cluster::LookupVolumeResponse*) override;
  grpc::Status Subscribe(grpc::ServerContext*, const SubscribeRequest*,
                         grpc::ServerWriter<Event>*) override;
  grpc::Status ResolvePath(grpc::ServerContext*, const ResolvePathRequest*,
                           AttrResponse*) override;

 private:
  struct RpcMetrics {
    Histogram* latency;
    Counter* errors;
  };
  // Times fn, counts its failure, and converts its status (GuardedCall: never throws).
  template <typename Fn>
  grpc::Status Run(const char* method, Fn&& fn);
  // After a namespace change: the directory's attributes, so the client need not ask (a
  // failure leaves *out unset; the change itself succeeded).
  void AddParentAttr(uint64_t dir, Attr* out);

  FilerService* const core_;
  const FilerGrpcOptions opts_;
  std::atomic<bool> shutdown_{false};
  std::map<std::string, RpcMetrics, std::less<>> metrics_;  // filled once, then read-only
};

}  // namespace kelp::filer
