#include "filer/client/chunk_intervals.h"

#include <algorithm>
#include <queue>
#include <utility>

namespace kelp::filer {
namespace {

struct Boundary {
  uint64_t pos;
  bool start;
  size_t idx;
};

// Splits the holes below inline_size into inline intervals.
std::vector<VisibleInterval> OverlayInline(std::vector<VisibleInterval> in, uint64_t inline_size) {
  if (inline_size == 0) return in;
  std::vector<VisibleInterval> out;
  out.reserve(in.size() + 1);
  for (const auto& iv : in) {
    if (iv.source != VisibleInterval::Source::kHole || iv.offset >= inline_size) {
      out.push_back(iv);
      continue;
    }
    uint64_t split = std::min(iv.end(), inline_size);
    VisibleInterval inl = iv;
    inl.source = VisibleInterval::Source::kInline;
    inl.size = split - iv.offset;
    out.push_back(inl);
    if (split < iv.end()) {
      VisibleInterval hole = iv;
      hole.offset = split;
      hole.size = iv.end() - split;
      out.push_back(hole);
    }
  }
  return out;
}

}  // namespace

std::vector<VisibleInterval> ResolveVisibleIntervals(const std::vector<const Chunk*>& chunks,
                                                     uint64_t file_size,
                                                     uint64_t inline_size) {
  std::vector<Boundary> bounds;
  bounds.reserve(chunks.size() * 2);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = *chunks[i];
    if (c.size() == 0 || c.offset() >= file_size) continue;
    uint64_t end = c.size() > file_size - c.offset() ? file_size : c.offset() + c.size();
    bounds.push_back({c.offset(), true, i});
    bounds.push_back({end, false, i});
  }
  std::sort(bounds.begin(), bounds.end(),
            [](const Boundary& a, const Boundary& b) { return a.pos < b.pos; });

  // The covering chunk is the live one with the greatest (seq, input index).
  using Key = std::pair<uint64_t, size_t>;
  std::priority_queue<Key> heap;
  std::vector<bool> live(chunks.size(), false);
  auto top = [&]() -> const Chunk* {
    while (!heap.empty() && !live[heap.top().second]) heap.pop();
    return heap.empty() ? nullptr : chunks[heap.top().second];
  };

  std::vector<VisibleInterval> out;
  auto emit = [&](uint64_t from, uint64_t to, const Chunk* c) {
    if (from >= to) return;
    if (!out.empty() && out.back().end() == from) {
      VisibleInterval& prev = out.back();
      bool same = c == nullptr ? prev.source == VisibleInterval::Source::kHole : prev.chunk == c;
      if (same) {
        prev.size += to - from;
        return;
      }
    }
    VisibleInterval iv;
    iv.offset = from;
    iv.size = to - from;
    if (c != nullptr) {
      iv.source = VisibleInterval::Source::kChunk;
      iv.chunk = c;
      iv.blob_offset = c->blob_offset() + (from - c->offset());
    }
    out.push_back(iv);
  };

  uint64_t cur = 0;
  size_t i = 0;
  while (i < bounds.size()) {
    uint64_t pos = bounds[i].pos;
    emit(cur, pos, top());
    for (; i < bounds.size() && bounds[i].pos == pos; ++i) {
      size_t idx = bounds[i].idx;
      if (bounds[i].start) {
        live[idx] = true;
        heap.push({chunks[idx]->seq(), idx});
      } else {
        live[idx] = false;
      }
    }
    cur = pos;
  }
  emit(cur, file_size, nullptr);
  return OverlayInline(std::move(out), std::min(inline_size, file_size));
}

std::vector<VisibleInterval> ResolveVisibleIntervals(
    const google::protobuf::RepeatedPtrField<Chunk>& chunks, uint64_t file_size,
    uint64_t inline_size) {
  std::vector<const Chunk*> ptrs;
  ptrs.reserve(chunks.size());
  for (const auto& c : chunks) ptrs.push_back(&c);
  return ResolveVisibleIntervals(ptrs, file_size, inline_size);
}

std::vector<VisibleInterval> ResolveVisibleIntervals(const std::vector<Chunk>& chunks,
                                                     uint64_t file_size,
                                                     uint64_t inline_size) {
  std::vector<const Chunk*> ptrs;
  ptrs.reserve(chunks.size());
  for (const auto& c : chunks) ptrs.push_back(&c);
  return ResolveVisibleIntervals(ptrs, file_size, inline_size);
}

std::vector<VisibleInterval> ClipIntervals(const std::vector<VisibleInterval>& intervals,
                                           uint64_t offset, uint64_t length) {
  std::vector<VisibleInterval> out;
  if (length == 0) return out;
  uint64_t end = offset + length < offset ? UINT64_MAX : offset + length;
  auto it = std::upper_bound(intervals.begin(), intervals.end(), offset,
                             [](uint64_t off, const VisibleInterval& iv) { return off < iv.end(); });
  for (; it != intervals.end() && it->offset < end; ++it) {
    VisibleInterval iv = *it;
    uint64_t from = std::max(iv.offset, offset);
    uint64_t to = std::min(iv.end(), end);
    if (iv.source == VisibleInterval::Source::kChunk) iv.blob_offset += from - iv.offset;
    iv.offset = from;
    iv.size = to - from;
    out.push_back(iv);
  }
  return out;
}

}  // namespace kelp::filer
