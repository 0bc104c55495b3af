#include "mount/core/blob_packer.h"

#include <algorithm>

namespace kelp::mount {

std::vector<PackedBlob> PackExtents(const std::vector<Extent>& extents, uint64_t max_blob_size) {
  std::vector<PackedBlob> out;
  uint64_t left = 0;
  for (const auto& e : extents) left += e.data.size();
  auto add_chunk = [&](uint64_t file_off, uint64_t size) {
    filer::Chunk c;
    c.set_offset(file_off);
    c.set_size(size);
    c.set_blob_offset(out.back().data.size());
    out.back().chunks.push_back(std::move(c));
  };
  for (const auto& e : extents) {
    uint64_t pos = 0;
    while (pos < e.data.size()) {
      if (out.empty() || out.back().data.size() >= max_blob_size) {
        out.emplace_back();
        out.back().data.reserve(std::min(left, max_blob_size));
      }
      PackedBlob& b = out.back();
      uint64_t room = max_blob_size - b.data.size();
      uint64_t take = std::min<uint64_t>(room, e.data.size() - pos);
      add_chunk(e.offset + pos, take);
      b.data.append(e.data, pos, take);
      pos += take;
      left -= take;
    }
  }
  for (auto& b : out) {
    for (auto& c : b.chunks) c.set_blob_size(b.data.size());
  }
  return out;
}

}  // namespace kelp::mount
