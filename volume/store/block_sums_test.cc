#include "volume/store/block_sums.h"

#include <catch2/catch.hpp>

namespace kelp::volume {
namespace {

// A file that is only compared by address.
class NoFile : public File {
 public:
  absl::StatusOr<size_t> ReadAt(uint64_t, size_t, char*) const override { return size_t{0}; }
  absl::StatusOr<size_t> WriteAt(uint64_t, std::string_view data) override { return data.size(); }
  absl::Status Truncate(uint64_t) override { return absl::OkStatus(); }
  absl::Status DataSync() override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> Size() const override { return uint64_t{0}; }
};

// Sums of a 4 MiB needle at offset: 64 blocks, about 600 bytes.
std::shared_ptr<BlockSums::Entry> Sums(const std::shared_ptr<File>& file, uint64_t offset) {
  auto e = std::make_shared<BlockSums::Entry>();
  e->file = file;
  e->offset = offset;
  e->blocks.assign(64, offset);
  return e;
}

constexpr size_t kBudget = 100 * 1024;  // about 170 entries, 42 of them written

TEST_CASE("block sums: a stream of written needles never pushes out the sums of needles being read") {
  auto file = std::make_shared<NoFile>();
  BlockSums sums(kBudget);
  // Needles 1-100 were read: their sums came from reads.
  for (uint64_t k = 1; k <= 100; ++k) sums.Put(k, Sums(file, k * 100));
  // Then 10,000 needles are written and never read.
  for (uint64_t k = 1000; k < 11000; ++k) sums.PutWritten(k, Sums(file, k * 100));
  for (uint64_t k = 1; k <= 100; ++k) CHECK(sums.Find(k, file.get(), k * 100) != nullptr);
  // The written ones keep a quarter of the budget, newest first.
  CHECK(sums.probation_entries() > 0);
  CHECK(sums.probation_entries() * (sizeof(BlockSums::Entry) + 64 * sizeof(uint64_t)) <= kBudget / 4);
  CHECK(sums.Find(10999, file.get(), 10999 * 100) != nullptr);
  CHECK(sums.Find(1000, file.get(), 1000 * 100) == nullptr);
}

TEST_CASE("block sums: a written needle that is read joins the read ones") {
  auto file = std::make_shared<NoFile>();
  BlockSums sums(kBudget);
  sums.PutWritten(7, Sums(file, 700));
  REQUIRE(sums.probation_entries() == 1);
  REQUIRE(sums.Find(7, file.get(), 700) != nullptr);
  CHECK(sums.probation_entries() == 0);
  // Later writes do not push it out.
  for (uint64_t k = 1000; k < 11000; ++k) sums.PutWritten(k, Sums(file, k * 100));
  CHECK(sums.Find(7, file.get(), 700) != nullptr);
  // Reads fill the budget past the written quarter: the least recently read go first.
  for (uint64_t k = 20000; k < 20400; ++k) sums.Put(k, Sums(file, k));
  CHECK(sums.Find(7, file.get(), 700) == nullptr);
  CHECK(sums.Find(20399, file.get(), 20399) != nullptr);
}

TEST_CASE("block sums: an entry taken at another place, or of a file that is gone, is not used") {
  auto file = std::make_shared<NoFile>();
  BlockSums sums(kBudget);
  sums.PutWritten(1, Sums(file, 100));
  CHECK(sums.Find(1, file.get(), 200) == nullptr);  // overwritten elsewhere since
  CHECK(sums.entries() == 0);
  sums.Put(2, Sums(file, 200));
  auto other = std::make_shared<NoFile>();
  CHECK(sums.Find(2, other.get(), 200) == nullptr);  // a vacuum moved it to another file
  sums.PutWritten(3, Sums(file, 300));
  file.reset();
  auto next = std::make_shared<NoFile>();  // may well sit where the old one did
  CHECK(sums.Find(3, next.get(), 300) == nullptr);
  CHECK(sums.entries() == 0);
}

}  // namespace
}  // namespace kelp::volume
