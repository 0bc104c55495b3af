#include "mount/core/blob_packer.h"

#include <catch2/catch.hpp>

namespace kelp::mount {
namespace {

TEST_CASE("scattered extents pack into one blob with a chunk record each") {
  std::vector<Extent> ext;
  for (int i = 0; i < 100; ++i) ext.push_back(Extent{static_cast<uint64_t>(i) * 100000, std::string(16384, 'a' + i % 26)});
  auto blobs = PackExtents(ext, 4 << 20);
  REQUIRE(blobs.size() == 1);
  REQUIRE(blobs[0].data.size() == 100 * 16384);
  REQUIRE(blobs[0].chunks.size() == 100);
  for (int i = 0; i < 100; ++i) {
    const auto& c = blobs[0].chunks[i];
    REQUIRE(c.offset() == static_cast<uint64_t>(i) * 100000);
    REQUIRE(c.size() == 16384);
    REQUIRE(c.blob_size() == blobs[0].data.size());
    REQUIRE(blobs[0].data.substr(c.blob_offset(), c.size()) == ext[i].data);
  }
}

TEST_CASE("packing splits at the largest blob size, extents across blobs") {
  std::vector<Extent> ext = {{0, std::string(700, 'a')}, {5000, std::string(700, 'b')}};
  auto blobs = PackExtents(ext, 1000);
  REQUIRE(blobs.size() == 2);
  REQUIRE(blobs[0].data.size() == 1000);
  REQUIRE(blobs[1].data.size() == 400);
  REQUIRE(blobs[0].chunks.size() == 2);
  REQUIRE(blobs[0].chunks[1].offset() == 5000);
  REQUIRE(blobs[0].chunks[1].size() == 300);
  REQUIRE(blobs[1].chunks[0].offset() == 5300);
  REQUIRE(blobs[1].chunks[0].blob_offset() == 0);
  REQUIRE(blobs[1].chunks[0].size() == 400);
  uint64_t total = 0;
  for (const auto& b : blobs)
    for (const auto& c : b.chunks) total += c.size();
  REQUIRE(total == 1400);
}

}  // namespace
}  // namespace kelp::mount
