// The filer's file APIs over HTTP: the SeaweedFS-style dialect (the URL path is the file
// path) and the AGFS-compatible one under /api/v1/, on the filer's one HTTP port
// (docs/filer-http.md). FilerServer routes its own paths first (IsFilerOwnPath) and hands
// everything else here.
//
// Which thread answers: RunInline says yes for requests that touch only the filer's store
// (stat, health, metadata changes, reads of files whose content is inline, small whole-file
// writes), so they are answered on the event loop without a hand-off; anything that talks to
// a volume server or walks a tree (big reads and writes, listings, recursive deletes) runs on
// the HTTP server's worker threads with blocking, streamed I/O.
//
// Threads: thread-safe. Construct before the HTTP server starts; destroy after it stopped.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "filer/cluster/cluster_api.h"
#include "filer/core/filer_service.h"
#include "filer/http/agfs_routes.h"
#include "filer/http/file_ops.h"
#include "filer/http/seaweed_routes.h"
#include "shared/http/http_server.h"
#include "volume/client/blob_client.h"
#include "volume/client/volume_client.h"

namespace kelp::filer {

struct FilerHttpOptions {
  // Largest blob a file written over HTTP is split into, in MiB (SeaweedFS's -maxMB).
  // Default: 4.
  size_t max_mb = 4;
  // Replication and collection of blobs written over HTTP; "" = the cluster default.
  std::string replication;
  std::string collection;
  // Answer store-only requests on the event loop (see above). Default: true.
  bool inline_small = true;
  // Entries a SeaweedFS-style listing returns without ?limit=. Default: 100,000.
  size_t list_limit = 100000;
};

// The exact paths the filer serves itself, ahead of the file APIs: a user file at one of
// them is not reachable over HTTP by that path (use /api/v1/files?path= for it).
bool IsFilerOwnPath(std::string_view path);

class FilerHttpApi {
 public:
  // core and cluster are not owned and must outlive this.
  FilerHttpApi(FilerService* core, ClusterApi* cluster, FilerHttpOptions options);
  ~FilerHttpApi();

  bool RunInline(const http::Request& req) const;
  void Handle(http::Request& req, http::ResponseWriter& w);
  // The filer's blob client (the core moves journaled bytes through it too).
  volume::BlobStore* blob_store() { return &io_; }

 private:
  volume::VolumeClient volume_client_;
  volume::BlobClient io_;
  FileOps ops_;
  SeaweedRoutes seaweed_;
  AgfsRoutes agfs_;
};

}  // namespace kelp::filer
