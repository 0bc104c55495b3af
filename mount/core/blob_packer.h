// Packs a file's scattered dirty extents into few blobs: each blob is the concatenation of
// whole or partial extents up to max_blob_size bytes, and each extent piece becomes one chunk
// record pointing into its blob (blob_offset). A flush of a hundred 16 KiB writes is one
// upload, not a hundred.
//
// Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mount/core/dirty_buffer.h"
#include "proto/filer.pb.h"

namespace kelp::mount {

struct PackedBlob {
  std::string data;
  // fid empty (set after upload); offset, size, blob_offset and blob_size filled in.
  std::vector<filer::Chunk> chunks;
};

// extents must not overlap (DirtyBuffer's never do); their order is kept and their bytes
// copied (they stay readable while the blobs upload). max_blob_size > 0.
std::vector<PackedBlob> PackExtents(const std::vector<Extent>& extents, uint64_t max_blob_size);

}  // namespace kelp::mount
