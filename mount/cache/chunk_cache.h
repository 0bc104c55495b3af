// ChunkCache: what the read path (mount/core/chunk_fetcher.h) needs of a local read cache;
// cache::TieredCache is the one the mount runs. Entries are keyed by immutable fid + block,
// so they never go stale. A cache failure is a miss, never an error.
//
// Thread-safety: implementations must allow every method from any thread concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kelp::mount {

class ChunkCache {
 public:
  virtual ~ChunkCache() = default;
  // Copies bytes [offset, offset + len) of blob fid (whose whole size is blob_size) into dst if
  // every block they touch is cached and verifies. false = miss (dst may hold garbage).
  virtual bool Read(std::string_view fid, uint64_t blob_size, uint64_t offset, size_t len, char* dst) = 0;
  // Offers blob bytes [offset, offset + data.size()): every whole block in them is cached (a
  // block starts at a multiple of BlockSize and runs BlockSize bytes, or to the blob's end).
  // Returns how many blocks were stored.
  virtual size_t Insert(std::string_view fid, uint64_t blob_size, uint64_t offset, std::string_view data) = 0;
  // The cache's alignment unit for blobs of this size.
  virtual uint64_t BlockSize(uint64_t blob_size) const = 0;
  // Drops every cached block of blob fid (whose whole size is blob_size): it was deleted, and
  // its space is better used by live data. A block being written is left to the eviction.
  virtual void Forget(std::string_view fid, uint64_t blob_size) = 0;
  // Whether freshly uploaded data should be inserted (write-through).
  virtual bool write_through() const { return false; }
  // Whether this many bytes of blocks would fit without pushing other entries out.
  virtual bool HasRoom(uint64_t /*bytes*/) const { return true; }
};

}  // namespace kelp::mount
