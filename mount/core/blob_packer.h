// Packs a file's scattered dirty extents into few blobs: each blob is the concatenation of
// whole or partial extents up to max_blob_size bytes, and each extent piece becomes one chunk
// record pointing into its blob (blob_offset). A flush of a hundred 16 KiB writes is one
// upload, not a hundred.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mount/core/dirty_buffer.h"
#include "proto/filer.pb.h"

namespace kelp::mount {

struct PackedBlob {
  // The blob's bytes: a view of the one extent it holds whole (no copy), or of `owned`, the
  // concatenation of several.
  std::string_view data;
  std::string owned;
  // fid empty (set after upload); offset, size, blob_offset and blob_size filled in.
  std::vector<filer::Chunk> chunks;
};

// extents must not overlap (DirtyBuffer's never do); their order is kept. A blob of one whole
// extent views its bytes (extents must outlive the blobs, and stay readable while they
// upload); others are copied. max_blob_size > 0.
std::vector<PackedBlob> PackExtents(const std::vector<Extent>& extents, uint64_t max_blob_size);

}  // namespace kelp::mount
