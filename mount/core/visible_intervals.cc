#include "mount/core/visible_intervals.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace kelp::mount {
namespace {

struct Seg {
  uint64_t end;
  const filer::Chunk* chunk;
};

// Paints [start, end) with chunk over whatever is in segs (non-overlapping, keyed by start).
void Paint(std::map<uint64_t, Seg>& segs, uint64_t start, uint64_t end, const filer::Chunk* chunk) {
  auto it = segs.lower_bound(start);
  if (it != segs.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > start) {  // prev straddles start: split it
      Seg tail = prev->second;
      prev->second.end = start;
      if (tail.end > end) {  // prev covers the whole new range: keep its right part too
        segs.emplace(end, Seg{tail.end, tail.chunk});
      }
    }
  }
  it = segs.lower_bound(start);
  while (it != segs.end() && it->first < end) {
    if (it->second.end > end) {  // straddles end: keep the right part
      Seg right{it->second.end, it->second.chunk};
      segs.erase(it);
      segs.emplace(end, right);
      break;
    }
    it = segs.erase(it);
  }
  segs.emplace(start, Seg{end, chunk});
}

}  // namespace

std::vector<VisibleInterval> ResolveVisibleIntervals(const std::vector<const filer::Chunk*>& chunks,
                                                     uint64_t file_size, uint64_t inline_size) {
  std::vector<const filer::Chunk*> order(chunks);
  std::stable_sort(order.begin(), order.end(),
                   [](const filer::Chunk* a, const filer::Chunk* b) { return a->seq() < b->seq(); });
  std::map<uint64_t, Seg> segs;
  for (const filer::Chunk* c : order) {
    if (c->size() == 0 || c->offset() >= file_size) continue;
    uint64_t end = std::min<uint64_t>(c->offset() + c->size(), file_size);
    Paint(segs, c->offset(), end, c);
  }
  std::vector<VisibleInterval> out;
  uint64_t inline_end = std::min(inline_size, file_size);
  auto fill_gap = [&](uint64_t from, uint64_t to) {
    if (from >= to) return;
    if (from < inline_end) {
      uint64_t e = std::min(to, inline_end);
      out.push_back(VisibleInterval{from, e - from, VisibleInterval::Source::kInline, nullptr, 0});
      from = e;
    }
    if (from < to) out.push_back(VisibleInterval{from, to - from, VisibleInterval::Source::kHole, nullptr, 0});
  };
  uint64_t pos = 0;
  for (const auto& [start, seg] : segs) {
    fill_gap(pos, start);
    VisibleInterval v;
    v.offset = start;
    v.size = seg.end - start;
    v.source = VisibleInterval::Source::kChunk;
    v.chunk = seg.chunk;
    v.blob_offset = seg.chunk->blob_offset() + (start - seg.chunk->offset());
    // Merge with the previous piece of the same chunk (split and rejoined by later chunks
    // never happens, but adjacent pieces of one chunk can come from Paint's splitting).
    if (!out.empty() && out.back().source == VisibleInterval::Source::kChunk && out.back().chunk == v.chunk &&
        out.back().end() == v.offset) {
      out.back().size += v.size;
    } else {
      out.push_back(v);
    }
    pos = seg.end;
  }
  fill_gap(pos, file_size);
  return out;
}

std::vector<VisibleInterval> ClipIntervals(const std::vector<VisibleInterval>& intervals, uint64_t offset,
                                           uint64_t length) {
  std::vector<VisibleInterval> out;
  uint64_t end = offset + length;
  auto it = std::upper_bound(intervals.begin(), intervals.end(), offset,
                             [](uint64_t off, const VisibleInterval& v) { return off < v.end(); });
  for (; it != intervals.end() && it->offset < end; ++it) {
    VisibleInterval v = *it;
    uint64_t s = std::max(v.offset, offset), e = std::min(v.end(), end);
    if (s >= e) continue;
    if (v.source == VisibleInterval::Source::kChunk) v.blob_offset += s - v.offset;
    v.offset = s;
    v.size = e - s;
    out.push_back(v);
  }
  return out;
}

}  // namespace kelp::mount
