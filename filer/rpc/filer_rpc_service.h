// The filer's metadata API (proto/filer.proto, method numbers in filer/client/filer_methods.h)
// on shared/rpc: a thin adapter over FilerService. Each handler converts the request, calls the
// core and lets the transport carry the absl::Status (with its errno) back.
//
// Where each call runs (shared/rpc/server.h): reads and mutations that only touch the local
// store run inline on the event loop; anything that waits on a device flush (sync, Fsync), on
// another server (Assign) or may list long (ReadDir pages above kInlineReadDirLimit, unlink
// batches above 8) runs on a worker; Subscribe is a stream with a thread of its own.
//
// Thread-safe: the transport calls the handlers from its threads concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>

#include "filer/core/filer_service.h"
#include "shared/rpc/server.h"

namespace kelp::filer {

struct FilerRpcOptions {
  // Entries per ReadDir page when the client asks for no limit, and the most any page holds.
  // Default: 4096.
  size_t readdir_max_page = 4096;
  // Events read from the log per batch of a Subscribe stream. Default: 256.
  size_t subscribe_batch = 256;
  // How often a waiting Subscribe stream checks that its client is still there and the
  // service is not stopping. Default: 200 ms.
  std::chrono::milliseconds subscribe_poll{200};
  // How long a Subscribe stream waits after an event for more to send with it: a burst of
  // changes (one per file of a tar) costs the subscriber one wake-up per few milliseconds,
  // not one per change. Default: 2 ms.
  std::chrono::milliseconds subscribe_linger{2};
};

class FilerRpcService {
 public:
  // Pages of up to this many entries are listed on the event loop.
  static constexpr uint32_t kInlineReadDirLimit = 512;
  // Unlinks one UnlinkBatch call may carry.
  static constexpr int kMaxUnlinkBatch = 1024;
  // Commits one CommitBatch call may carry.
  static constexpr int kMaxCommitBatch = 64;

  // core is not owned and must outlive this.
  explicit FilerRpcService(FilerService* core, FilerRpcOptions options = {});

  // The methods, to serve with an rpc::Server.
  rpc::Service* service() { return &service_; }
  // Ends Subscribe streams (within subscribe_poll); unary calls are unaffected.
  void Shutdown() { shutdown_ = true; }

 private:
  void AddNamespaceMethods();
  void AddDataMethods();
  void AddSessionMethods();
  // The directory's attributes after a change, into *out (left unset if they cannot be read).
  void AddParentAttr(uint64_t dir, Attr* out);
  // One unlink, as the Unlink method and each item of UnlinkBatch answer it.
  absl::Status UnlinkOne(const UnlinkRequest& req, UnlinkResponse* resp);

  FilerService* const core_;
  const FilerRpcOptions opts_;
  rpc::Service service_;
  std::atomic<bool> shutdown_{false};
};

}  // namespace kelp::filer
