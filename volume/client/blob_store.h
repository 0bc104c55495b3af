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
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kelp::volume {

// Takes the bytes of a read in order, piece by piece; an error it returns ends the read.
//
// A sink that copies every byte into one buffer may name it (into, into_size): a transport
// that can receive into memory puts the bytes there, in order from its start, and hands the
// sink views of them where they landed, so the sink has nothing to copy (BlobStore::Read).
// Pieces may still come from elsewhere (a fake store, a transport that cannot): the sink
// compares piece.data() with where the piece belongs.
struct ByteSink {
  template <typename F,
            std::enable_if_t<!std::is_same_v<std::decay_t<F>, ByteSink> &&
                                 std::is_invocable_r_v<absl::Status, const F&, std::string_view>,
                             int> = 0>
  ByteSink(F write) : write(std::move(write)) {}  // NOLINT: implicit, from any callable
  ByteSink(std::function<absl::Status(std::string_view)> write, char* into, size_t into_size)
      : write(std::move(write)), into(into), into_size(into_size) {}

  absl::Status operator()(std::string_view piece) const { return write(piece); }
  // The buffer left after the first `taken` bytes (null when none was named).
  char* into_after(uint64_t taken) const {
    return into != nullptr && taken <= into_size ? into + taken : nullptr;
  }
  size_t into_size_after(uint64_t taken) const {
    return into_after(taken) != nullptr ? into_size - taken : 0;
  }

  std::function<absl::Status(std::string_view)> write;
  char* into = nullptr;
  size_t into_size = 0;
};

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

  // Whether a whole read of blob fid comes straight from a volume file on this machine
  // (BlobClient's local reads): as cheap as a read cache on the same disk, so a cache need not
  // keep a copy of it. May ask the blob's server once (the answer is kept per server).
  virtual bool ReadsLocally(std::string_view /*fid*/) { return false; }

  // Get into a buffer of len bytes (received straight into it where the transport can).
  absl::Status Read(std::string_view fid, uint64_t offset, size_t len, char* dst) {
    size_t got = 0;
    auto take = [&](std::string_view piece) {
      if (piece.size() > len - got)
        return absl::DataLossError("a replica sent more bytes than asked for");
      if (piece.data() != dst + got) std::memcpy(dst + got, piece.data(), piece.size());
      got += piece.size();
      return absl::OkStatus();
    };
    absl::Status s = Get(fid, offset, len, ByteSink(take, dst, len));
    if (s.ok() && got != len) return absl::DataLossError("a replica sent fewer bytes than asked for");
    return s;
  }
};

}  // namespace kelp::volume
