// Resolves a file's chunk list into what a reader sees: a sorted, gap-free list of intervals
// covering [0, file_size), each served by one chunk, by the inline data, or a hole (zeros).
// Where chunks overlap the highest seq wins (equal seqs: the later one in the input wins).
// Inline data is the bottom layer, bytes [0, inline_size) under every chunk.
//
// Mirrors filer/client/chunk_intervals.h (same rules, same shape) so the mount can switch to
// the filer's resolver once it is on main. Pure functions; thread-safe; O(n log n).
#pragma once

#include <cstdint>
#include <vector>

#include "proto/filer.pb.h"

namespace kelp::mount {

struct VisibleInterval {
  enum class Source { kHole, kInline, kChunk };

  uint64_t offset = 0;  // in the file
  uint64_t size = 0;
  Source source = Source::kHole;
  // kChunk: the winning chunk (points into the caller's list, which must outlive this) and
  // where this interval's first byte sits in its blob.
  const filer::Chunk* chunk = nullptr;
  uint64_t blob_offset = 0;

  uint64_t end() const { return offset + size; }
};

// chunks may be in any order.
std::vector<VisibleInterval> ResolveVisibleIntervals(const std::vector<const filer::Chunk*>& chunks,
                                                     uint64_t file_size, uint64_t inline_size = 0);

// The intervals that overlap [offset, offset + length), clipped to it. intervals must be
// sorted and non-overlapping (as ResolveVisibleIntervals returns them).
std::vector<VisibleInterval> ClipIntervals(const std::vector<VisibleInterval>& intervals, uint64_t offset,
                                           uint64_t length);

}  // namespace kelp::mount
