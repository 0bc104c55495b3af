// BlobStore: the mount's view of the volume servers. A blob is written once, whole, and read
// by ranges. Writes are made durable either one by one (Put with fsync) or afterwards, per
// volume (SyncVolumes: what fsync(2) of a file calls for the volumes its blobs went to). VolumeBlobStore is the real one (HTTP to volume servers, fids assigned by the
// filer); mount/testing/fake_blob_store.h is an in-memory one with fault injection.
//
// Thread-safety: every method may be called from any thread concurrently; calls block on
// network I/O, so callers must not hold locks across them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp::mount {

class BlobStore {
 public:
  virtual ~BlobStore() = default;

  // Stores data as a new blob and returns its fid. With fsync the data is durable on every
  // replica before this returns. Errors carry ENOSPC when the cluster is full, else EIO.
  virtual absl::StatusOr<std::string> Put(std::string_view data, bool fsync) = 0;

  // Copies bytes [offset, offset + len) of blob fid into dst, trying every replica. Reading
  // past the blob's end is an error. Errors carry EIO.
  virtual absl::Status Get(std::string_view fid, uint64_t offset, size_t len, char* dst) = 0;

  // Makes every blob stored so far in these volumes (by Put without fsync) durable on every
  // replica. Errors carry EIO.
  virtual absl::Status SyncVolumes(const std::vector<uint32_t>& volume_ids) = 0;
};

}  // namespace kelp::mount
