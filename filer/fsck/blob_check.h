// The volume half of `kelp filer.fsck` (docs/fsck.md), against the volume servers named:
//  - missing blobs: every chunk record's blob must be on at least one server holding its
//    volume. Volume locations come from the servers themselves (their gRPC Status lists their
//    volumes); each then answers for its fids in batches with VolumeService.StatBlobs, which
//    reads one needle header per fid and no data. A fid is missing when every server holding
//    its volume answered that it does not hold it, or when no server holds the volume (and
//    every server could be asked); when a server could not be asked it is "unverified".
//  - leaked blobs: every live blob of every volume on those servers (VolumeService.ListBlobs)
//    that no chunk record references and that is not in the GC queue. Nothing else frees it.
//    With fix, leaked blobs are put in the GC queue, which the filer drains when it runs.
// Blobs uploaded by a client that has not committed them yet look leaked: run it with the
// filer stopped (as fsck requires anyway), so no upload is in flight.
//
// Memory is O(distinct fids). Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "filer/store/kv_store.h"

namespace kelp::filer {

struct BlobCheckOptions {
  // Volume servers to ask, as "host:port" (their HTTP port; gRPC is port + 10000) or
  // "host:port.grpcPort".
  std::vector<std::string> volume_servers;
  // Fids per StatBlobs call. Default: 1000.
  size_t batch = 1000;
  // Queue leaked blobs for GC. Default: false (report only).
  bool fix = false;
};

struct BlobCheckResult {
  uint64_t chunk_records = 0;
  uint64_t fids = 0;  // distinct
  uint64_t present = 0;
  uint64_t missing = 0;
  uint64_t unverified = 0;
  uint64_t listed = 0;  // distinct live blobs on the servers
  uint64_t leaked = 0;
  uint64_t leaked_bytes = 0;
  uint64_t queued = 0;  // leaked blobs put in the GC queue (fix)
  // One line per missing or unverified fid (with the file's path), per leaked blob left
  // leaked, then per server that could not be asked.
  std::vector<std::string> problems;
  // One line per leaked blob queued for GC.
  std::vector<std::string> fixed;
};

// verbose receives progress lines. With options.fix, kv is written (GC queue entries).
absl::StatusOr<BlobCheckResult> CheckBlobs(KvStore& kv, const BlobCheckOptions& options,
                                           const std::function<void(std::string_view)>& verbose);

// "host:port" -> "host:port+10000"; "host:port.grpc" -> "host:grpc". Empty on a bad address.
std::string VolumeGrpcAddress(std::string_view address);

}  // namespace kelp::filer
