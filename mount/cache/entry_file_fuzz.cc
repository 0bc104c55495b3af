// libFuzzer target: reading a cache entry file (entry_file.h) as the scan on open and the
// read path do: header check, then data verified page by page. The first byte asks for
// fix-ups (header checksum, page checksums) so inputs get past the hashes. The file lives in
// a private temporary directory. Properties: no crash; data that reads back is the data
// the file holds.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "mount/cache/entry_file.h"
#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/testing/fuzz_util.h"

using namespace kelp::mount::cache;
namespace f = kelp::mount::cache::format;

namespace {

int g_dirfd = -1;

void FixUp(uint8_t flags, Tier tier, std::string* file) {
  if (file->size() < f::kEntryFixedLen) return;
  char* p = file->data();
  size_t fid_len = kelp::DecodeFixed16LE(p + f::kEntryOffFidLen);
  // Up to 128 KiB: data of 64 KiB or more starts at a page boundary.
  uint32_t data_len = kelp::DecodeFixed32LE(p + f::kEntryOffDataLen) % (1 << 17);
  uint64_t header_len = EntryHeaderLen(fid_len, data_len);
  uint64_t data_off = EntryDataOffset(fid_len, data_len);
  if (data_off + data_len > file->size()) return;
  file->resize(data_off + data_len);
  p = file->data();
  kelp::EncodeFixed32LE(p + f::kEntryOffMagic, f::kEntryMagic);
  kelp::EncodeFixed16LE(p + f::kEntryOffVersion, f::kEntryVersion);
  kelp::EncodeFixed32LE(p + f::kEntryOffDataLen, data_len);
  p[f::kEntryOffTier] = static_cast<char>(tier);
  kelp::EncodeFixed64LE(p + f::kEntryOffEntryId, 1);
  if (flags & 1) {
    std::vector<uint64_t> sums = PageSums(std::string_view(p + data_off, data_len));
    for (size_t i = 0; i < sums.size(); ++i) kelp::EncodeFixed64LE(p + f::kEntryFixedLen + fid_len + 8 * i, sums[i]);
  }
  if (flags & 2) {
    kelp::Hasher h;
    h.Update(p, f::kEntryOffHeaderSum);
    h.Update(p + f::kEntryFixedLen, header_len - f::kEntryFixedLen);
    kelp::EncodeFixed64LE(p + f::kEntryOffHeaderSum, h.Digest());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kelp::fuzz::QuietLogs();
  g_dirfd = open(kelp::fuzz::TempDirForRun().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g_dirfd < 0) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint8_t flags = data[0];
  Tier tier = static_cast<Tier>((flags >> 2) % kNumTiers);
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  FixUp(flags, tier, &file);
  const std::string name = EntryFileName(1);
  int fd = openat(g_dirfd, name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size()));
  close(fd);

  auto meta = ReadEntryHeader(g_dirfd, 1, tier, file.size());
  if (meta.ok()) {
    FUZZ_CHECK(meta->id == 1 && meta->tier == tier);
    FUZZ_CHECK(meta->page_sums.size() == PageCount(meta->data_len));
    auto rfd = OpenEntryFile(g_dirfd, 1);
    FUZZ_CHECK(rfd.ok());
    std::string dst(meta->data_len, '\0');
    uint64_t header_len = file.size() - meta->data_len;
    if (ReadEntryData(*rfd, meta->ref(), meta->page_sums.data(), 0, meta->data_len, dst.data()).ok()) {
      FUZZ_CHECK(dst == std::string_view(file).substr(header_len));
    }
    if (meta->data_len > 1) {
      uint64_t off = flags % meta->data_len;
      size_t len = meta->data_len - off;
      uint64_t first_page = off / f::kPageSize;
      if (ReadEntryData(*rfd, meta->ref(), meta->page_sums.data() + first_page, off, len, dst.data()).ok()) {
        FUZZ_CHECK(std::string_view(dst.data(), len) == std::string_view(file).substr(header_len + off, len));
      }
    }
    close(*rfd);
  }
  unlinkat(g_dirfd, name.c_str(), 0);
  return 0;
}
