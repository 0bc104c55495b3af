// Resolves a file's chunk list into what a reader sees: a sorted, gap-free list of intervals
// covering [0, file_size), each served by one chunk, by the inline data, or a hole (zeros).
// Where chunks overlap the highest seq wins (equal seqs: the later one in the input wins).
// Inline data (GetChunksResponse.inline_data) is the bottom layer: bytes [0, inline_size)
// under every chunk. Bytes past a chunk list's reach but below file_size are a hole.
//
// Used by the mount's read path and by the filer's compaction, so both agree byte for byte.
// Pure functions; thread-safe. Cost O(n log n) in the number of chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/filer.pb.h"

namespace kelp::filer {

struct VisibleInterval {
  enum class Source { kHole, kInline, kChunk };

  uint64_t offset = 0;  // in the file
  uint64_t size = 0;
  Source source = Source::kHole;
  // kChunk: the winning chunk (points into the caller's list, which must outlive this) and
  // where this interval's first byte sits in its blob.
  const Chunk* chunk = nullptr;
  uint64_t blob_offset = 0;

  uint64_t end() const { return offset + size; }
};

// chunks may be in any order.
std::vector<VisibleInterval> ResolveVisibleIntervals(const std::vector<const Chunk*>& chunks,
                                                     uint64_t file_size,
                                                     uint64_t inline_size = 0);
std::vector<VisibleInterval> ResolveVisibleIntervals(
    const google::protobuf::RepeatedPtrField<Chunk>& chunks, uint64_t file_size,
    uint64_t inline_size = 0);
std::vector<VisibleInterval> ResolveVisibleIntervals(const std::vector<Chunk>& chunks,
                                                     uint64_t file_size,
                                                     uint64_t inline_size = 0);

// The intervals that overlap [offset, offset + length), clipped to it (for a read).
std::vector<VisibleInterval> ClipIntervals(const std::vector<VisibleInterval>& intervals,
                                           uint64_t offset, uint64_t length);

}  // namespace kelp::filer
