#include "mount/cache/entry_file.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mount/cache/cache_format.h"
#include "mount/cache/cache_test_util.h"

namespace kelp::mount::cache {
namespace {

using testing::BlobBytes;
using testing::TempDir;

struct Fixture {
  TempDir tmp;
  int fd = ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY);
  std::string fid = "3,01637037d6";
  std::string data = BlobBytes(fid, 262144, 262144 - 1000);  // last page partial
  std::vector<uint64_t> sums = PageSums(data);
  EntryRef ref{fid, 4 << 20, 262144, static_cast<uint32_t>(data.size()), Tier::kLarge, 42};
  ~Fixture() { ::close(fd); }
  std::string File() const { return tmp.Sub(EntryFileName(ref.id)); }
  absl::Status Write() const { return WriteEntryFile(fd, ref, sums, data).status(); }
  // Reads like DiskCache does: open, pread with the in-memory checksums of the range, close.
  absl::Status Read(uint64_t off, size_t len, std::string* out) const {
    out->assign(len, '\0');
    absl::StatusOr<int> file = OpenEntryFile(fd, ref.id);
    if (!file.ok()) return file.status();
    absl::Status s = ReadEntryData(*file, ref, sums.data() + off / 4096, off, len, out->data());
    ::close(*file);
    return s;
  }
};

}  // namespace

TEST_CASE("entry file names are 16 hex digits") {
  CHECK(EntryFileName(0x1a2b) == "0000000000001a2b");
  uint64_t id = 0;
  CHECK(ParseEntryFileName("0000000000001a2b", &id));
  CHECK(id == 0x1a2b);
  CHECK_FALSE(ParseEntryFileName("000000000001a2b", &id));
  CHECK_FALSE(ParseEntryFileName("0000000000001A2B", &id));
  CHECK_FALSE(ParseEntryFileName("index.tmp", &id));
}

TEST_CASE("an entry file reads back any range, aligned or not") {
  Fixture f;
  absl::StatusOr<uint64_t> bytes = WriteEntryFile(f.fd, f.ref, f.sums, f.data);
  REQUIRE(bytes.ok());
  uint64_t size = EntryFileSize(f.fid.size(), f.data.size());
  CHECK(*bytes >= size);
  CHECK(*bytes < size + 8192);
  std::string out;
  for (auto [off, len] : std::vector<std::pair<uint64_t, size_t>>{{0, 4096},
                                                                  {16384, 16384},
                                                                  {1, 1},
                                                                  {4095, 2},
                                                                  {100, 50000},
                                                                  {f.data.size() - 3000, 3000},
                                                                  {0, f.data.size()},
                                                                  {5000, 0}}) {
    INFO("off " << off << " len " << len);
    REQUIRE(f.Read(off, len, &out).ok());
    CHECK(out == f.data.substr(off, len));
  }
  CHECK(absl::IsAlreadyExists(f.Write()));  // never rewritten
}

// Writes an entry of len bytes of blob fid into dirfd and reads all of it back, and its
// header; checks where its data starts and the file's size.
void RoundTrip(int dirfd, const std::string& dir, uint64_t id, size_t len) {
  INFO("data of " << len << " bytes");
  std::string fid = "7,0d00000004";
  std::string data = BlobBytes(fid, 0, len);
  std::vector<uint64_t> sums = PageSums(data);
  EntryRef ref{fid, len, 0, static_cast<uint32_t>(len), Tier::kLarge, id};
  REQUIRE(WriteEntryFile(dirfd, ref, sums, data).ok());
  uint64_t off = EntryDataOffset(fid.size(), len);
  uint64_t header = EntryHeaderLen(fid.size(), len);
  if (len >= format::kAlignedDataMin) {
    CHECK(off % format::kPageSize == 0);
    CHECK(off >= header);
    CHECK(off < header + format::kPageSize);
  } else {
    CHECK(off == header);
  }
  struct stat st;
  REQUIRE(::stat((dir + "/" + EntryFileName(id)).c_str(), &st) == 0);
  CHECK(static_cast<uint64_t>(st.st_size) == off + len);
  CHECK(static_cast<uint64_t>(st.st_size) == EntryFileSize(fid.size(), len));
  absl::StatusOr<int> file = OpenEntryFile(dirfd, id);
  REQUIRE(file.ok());
  std::string out(len, '\0');
  CHECK(ReadEntryData(*file, ref, sums.data(), 0, len, out.data()).ok());
  CHECK(out == data);
  ::close(*file);
  absl::StatusOr<EntryMeta> meta = ReadEntryHeader(dirfd, id, Tier::kLarge, st.st_size);
  REQUIRE(meta.ok());
  CHECK(meta->page_sums == sums);
}

TEST_CASE("data of 64 KiB or more starts at a page boundary, smaller data right after the header") {
  TempDir tmp;
  int fd = ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  uint64_t id = 1;
  for (size_t len : {size_t{1}, size_t{4096}, size_t{65535}, size_t{65536}, size_t{65537},
                     size_t{100000}, size_t{262144}}) {
    RoundTrip(fd, tmp.path(), id++, len);
  }
  ::close(fd);
}

TEST_CASE("entries are written and read back on tmpfs as on a disk") {
  testing::TmpfsMount tmpfs(16 << 20);
  if (!tmpfs.ok()) {
    WARN("cannot mount tmpfs here; skipped");
    return;
  }
  int fd = ::open(tmpfs.path().c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  RoundTrip(fd, tmpfs.path(), 1, 1000);
  RoundTrip(fd, tmpfs.path(), 2, 262144 - 1000);
  ::close(fd);
}

TEST_CASE("a flipped data byte fails only the reads of its page") {
  Fixture f;
  REQUIRE(f.Write().ok());
  uint64_t header = EntryDataOffset(f.fid.size(), f.data.size());
  testing::FlipByte(f.File(), header + 5 * format::kPageSize + 17);
  std::string out;
  CHECK(absl::IsDataLoss(f.Read(5 * 4096, 16, &out)));
  CHECK(absl::IsDataLoss(f.Read(4 * 4096 + 100, 5000, &out)));
  REQUIRE(f.Read(0, 5 * 4096, &out).ok());
  CHECK(out == f.data.substr(0, 5 * 4096));
  REQUIRE(f.Read(6 * 4096, 4096, &out).ok());
}

TEST_CASE("checksums of another block, a short file or a missing one fail the read") {
  Fixture f;
  REQUIRE(f.Write().ok());
  std::string out;
  SECTION("checksums of other data") {
    std::vector<uint64_t> other = PageSums(BlobBytes("3,01637037d7", 262144, f.data.size()));
    absl::StatusOr<int> file = OpenEntryFile(f.fd, f.ref.id);
    REQUIRE(file.ok());
    out.resize(10);
    CHECK(absl::IsDataLoss(ReadEntryData(*file, f.ref, other.data(), 0, 10, out.data())));
    ::close(*file);
  }
  SECTION("truncated") {
    REQUIRE(::truncate(f.File().c_str(), 70000) == 0);
    CHECK(f.Read(0, 100, &out).ok());  // the bytes that are there still verify
    CHECK(absl::IsDataLoss(f.Read(f.data.size() - 10, 10, &out)));
  }
  SECTION("missing") {
    REQUIRE(::unlink(f.File().c_str()) == 0);
    CHECK(absl::IsNotFound(f.Read(0, 10, &out)));
  }
}

TEST_CASE("ReadEntryHeader accepts complete, intact entries only") {
  Fixture f;
  REQUIRE(f.Write().ok());
  uint64_t size = EntryFileSize(f.fid.size(), f.data.size());
  absl::StatusOr<EntryMeta> meta = ReadEntryHeader(f.fd, f.ref.id, Tier::kLarge, size);
  REQUIRE(meta.ok());
  CHECK(meta->fid == f.fid);
  CHECK(meta->blob_size == f.ref.blob_size);
  CHECK(meta->block_offset == f.ref.block_offset);
  CHECK(meta->data_len == f.data.size());
  CHECK(meta->page_sums == f.sums);
  CHECK(absl::IsDataLoss(ReadEntryHeader(f.fd, f.ref.id, Tier::kLarge, size - 1).status()));
  CHECK(absl::IsDataLoss(ReadEntryHeader(f.fd, f.ref.id, Tier::kSmall, size).status()));
  SECTION("header field") { testing::FlipByte(f.File(), format::kEntryOffBlobSize + 2); }
  SECTION("fid") { testing::FlipByte(f.File(), format::kEntryFixedLen + 1); }
  SECTION("page checksum") {
    testing::FlipByte(f.File(), format::kEntryFixedLen + f.fid.size() + 3);
  }
  CHECK(absl::IsDataLoss(ReadEntryHeader(f.fd, f.ref.id, Tier::kLarge, size).status()));
}

}  // namespace kelp::mount::cache
