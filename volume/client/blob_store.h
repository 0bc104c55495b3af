// BlobStore: file data as immutable blobs on the cluster's volume servers, as the mount and the
// filer's HTTP API use them: a blob is written once, whole, and read by ranges. Writes are made
// durable one by one (Put with fsync) or afterwards, per volume (SyncVolumes: what fsync(2) of a
// file calls for the volumes its blobs went to). BlobClient (blob_client.h) is the real one;
// tests use in-memory ones with fault injection (mount/testing/fake_blob_store.h).
//
// Errors carry the errno a FUSE or HTTP edge should answer with: ENOSPC when the cluster is
// full, EIO when no replica answered.
//
// Thread-safety: every method may be called from any thread concurrently; calls block on
// network I/O, so callers must not hold locks across them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp::volume {

// Takes the bytes of a read in order, piece by piece; an error it returns ends the read.
using ByteSink = std::function<absl::Status(std::string_view)>;

class BlobStore {
 public:
  virtual ~BlobStore() = default;

  // Stores data as a new blob and returns its fid. With fsync the data is durable on every
  // replica before this returns.
  virtual absl::StatusOr<std::string> Put(std::string_view data, bool fsync) = 0;

  // Delivers bytes [offset, offset + length) of blob fid to sink, in order, each byte once,
  // going on from another replica if one fails part way. An error from sink is returned as
  // is. Reading past the blob's end is an error.
  virtual absl::Status Get(std::string_view fid, uint64_t offset, uint64_t length, const ByteSink& sink) = 0;

  // Makes every blob stored so far in these volumes (by Put without fsync) durable on every
  // replica.
  virtual absl::Status SyncVolumes(const std::vector<uint32_t>& volume_ids) = 0;

  // Best-effort delete of blobs that nothing references (an upload whose commit failed).
  virtual void Discard(const std::vector<std::string>& fids) = 0;

  // Get into a buffer of len bytes.
  absl::Status Read(std::string_view fid, uint64_t offset, size_t len, char* dst) {
    size_t got = 0;
    absl::Status s = Get(fid, offset, len, [&](std::string_view piece) {
      if (piece.size() > len - got) return absl::DataLossError("a replica sent more bytes than asked for");
      std::memcpy(dst + got, piece.data(), piece.size());
      got += piece.size();
      return absl::OkStatus();
    });
    if (s.ok() && got != len) return absl::DataLossError("a replica sent fewer bytes than asked for");
    return s;
  }
};

}  // namespace kelp::volume
