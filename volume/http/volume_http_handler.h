// The HTTP data plane of a volume server (SeaweedFS compatible):
//   PUT|POST /<fid>   raw body or multipart/form-data -> 201 {"name","size","eTag"}
//                     ?fsync=true: durable before the reply; ?type=replicate: from a primary
//   GET|HEAD /<fid>   ETag, If-None-Match -> 304, Range -> 206 / 416, Last-Modified
//   DELETE /<fid>     -> 202 {"size"}, 404 if absent
//   POST /sync?volumes=3,5  makes everything written to those volumes durable, on every
//                     replica (-> 200 {"synced":N}); ?type=replicate: this copy only
//   GET /<fid> with X-Kelp-Local-Read: 1, from 127.0.0.0/8 only -> 200, no body, where the
//                     needle sits: X-Kelp-Dat (the .dat's absolute path), X-Kelp-Needle-Offset,
//                     X-Kelp-Needle-Size (local reads: volume/client/local_reader.h)
//   GET /status       JSON: volumes, sizes, counts, disk
//   GET /metrics      Prometheus text
// <fid> is "3,01637037d6", "3/01637037d6", either with an extension, or "3/01637037d6/name".
// A wrong cookie is a 404, a malformed fid a 400, a body over the size limit a 413, a full
// disk a 507, a read-only volume a 403, a failed replication a 503.
//
// With [jwt.signing] (and [jwt.signing.read]) keys in security.toml, writes and deletes
// (and reads) of a fid need a valid token for it ("Authorization: Bearer ..." or ?jwt=),
// replicated ones included: 401 otherwise, before anything is read or changed.
//
// Small GETs and HEADs, and small unreplicated PUTs and DELETEs without fsync, run inline on
// the HTTP event loop (see http::Handler::RunInline); the rest on worker threads.
// Threads: thread-safe.
#pragma once

#include <cstdint>

#include "shared/http/http_server.h"
#include "shared/security/security_config.h"
#include "volume/client/local_reader.h"
#include "volume/core/blob_service.h"
#include "volume/core/volume_metrics.h"
#include "volume/http/upload_budget.h"
#include "volume/store/store.h"

namespace kelp::volume {

class VolumeHttpHandler : public http::Handler {
 public:
  struct Options {
    uint64_t file_size_limit = 256ull << 20;  // bytes; larger uploads get 413
    uint32_t inline_read_max = 64 << 10;      // bytes; larger blobs are read on a worker thread
    uint64_t upload_budget = 256ull << 20;    // bytes of upload bodies buffered at once
    int upload_wait_ms = 10000;               // how long an upload waits for room before 503
  };
  // security: the keys tokens are checked with (security::Current() when null).
  VolumeHttpHandler(Options options, Store* store, BlobService* blobs, VolumeMetrics* metrics,
                    std::shared_ptr<const security::SecurityConfig> security = nullptr);

  bool RunInline(const http::Request& head) const override;
  void Handle(http::Request& req, http::ResponseWriter& w) override;

 private:
  struct Outcome {
    uint64_t bytes_in = 0;
    uint64_t bytes_out = 0;
  };
  void Route(http::Request& req, http::ResponseWriter& w, Outcome* out);
  void Get(http::Request& req, http::ResponseWriter& w, const FileId& fid, Outcome* out);
  // GET /<fid> with kLocalReadHeader: where the needle sits in which file, for a reader on
  // this machine (docs/volume-http.md, "Local reads").
  void Locate(const http::Request& req, http::ResponseWriter& w, const FileId& fid);
  void Put(http::Request& req, http::ResponseWriter& w, const FileId& fid, Outcome* out);
  void Delete(http::Request& req, http::ResponseWriter& w, const FileId& fid);
  void Sync(http::Request& req, http::ResponseWriter& w);
  void Status(http::ResponseWriter& w);
  // OK when the request carries a token for fid that the write (or read) key signed, or
  // when that key is off; Unauthenticated otherwise.
  absl::Status Authorize(const http::Request& req, const FileId& fid, bool write) const;

  const Options opts_;
  Store* const store_;
  BlobService* const blobs_;
  VolumeMetrics* const metrics_;
  UploadBudget budget_;
  const std::shared_ptr<const security::SecurityConfig> security_;
};

}  // namespace kelp::volume
