#include "mount/core/blob_packer.h"

#include <algorithm>

namespace kelp::mount {

std::vector<PackedBlob> PackExtents(const std::vector<Extent>& extents, uint64_t max_blob_size) {
  std::vector<PackedBlob> out;
  if (extents.size() == 1 && extents[0].data.size() <= max_blob_size) {
    // One extent that fits: upload its bytes as they are.
    const Extent& e = extents[0];
    PackedBlob& b = out.emplace_back();
    b.data = e.data;
    filer::Chunk& c = b.chunks.emplace_back();
    c.set_offset(e.offset);
    c.set_size(e.data.size());
    c.set_blob_offset(0);
    c.set_blob_size(e.data.size());
    return out;
  }
  uint64_t left = 0;
  for (const auto& e : extents) left += e.data.size();
  auto add_chunk = [&](uint64_t file_off, uint64_t size) {
    filer::Chunk c;
    c.set_offset(file_off);
    c.set_size(size);
    c.set_blob_offset(out.back().owned.size());
    out.back().chunks.push_back(std::move(c));
  };
  for (const auto& e : extents) {
    uint64_t pos = 0;
    while (pos < e.data.size()) {
      if (out.empty() || out.back().owned.size() >= max_blob_size) {
        out.emplace_back();
        out.back().owned.reserve(std::min(left, max_blob_size));
      }
      PackedBlob& b = out.back();
      uint64_t room = max_blob_size - b.owned.size();
      uint64_t take = std::min<uint64_t>(room, e.data.size() - pos);
      add_chunk(e.offset + pos, take);
      b.owned.append(e.data, pos, take);
      pos += take;
      left -= take;
    }
  }
  for (auto& b : out) {
    b.data = b.owned;
    for (auto& c : b.chunks) c.set_blob_size(b.data.size());
  }
  return out;
}

}  // namespace kelp::mount
