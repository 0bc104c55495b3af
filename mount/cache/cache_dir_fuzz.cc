// libFuzzer target: the cache directory's index hint (cache_dir.cc, docs/cache-format.md
// "index"), read by CacheDir::Scan when a mount opens its cache. The input is the index body;
// when its first byte is odd the magic, version and trailing checksum are fixed up so the
// record parser is reached. The directory lives in a private temporary directory.
// Properties: no crash; an index never invents entries the tier directories do not hold.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "mount/cache/cache_dir.h"
#include "shared/coding.h"
#include "shared/hash.h"
#include "shared/testing/fuzz_util.h"

using namespace kelp::mount::cache;
namespace f = kelp::mount::cache::format;

namespace {

std::string g_path;
std::unique_ptr<CacheDir> g_dir;
TierLayout g_layout{32 << 10, 1 << 20, 64 << 10, 256 << 10};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kelp::fuzz::QuietLogs();
  g_path = kelp::fuzz::TempDirForRun() + "/cache";
  auto d = CacheDir::Open(g_path, g_layout);
  if (!d.ok()) std::abort();
  g_dir = std::move(*d);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string index(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    if (index.size() < f::kIndexHeaderLen) index.resize(f::kIndexHeaderLen);
    std::memcpy(index.data(), f::kIndexMagic, sizeof f::kIndexMagic);
    kelp::EncodeFixed32LE(index.data() + 8, f::kFormatVersion);
    uint64_t sum = kelp::Hash64(index.data(), index.size());
    char trailer[8];
    kelp::EncodeFixed64LE(trailer, sum);
    index.append(trailer, sizeof trailer);
  }
  std::string file = g_path + "/" + f::kIndexFile;
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(write(fd, index.data(), index.size()) == static_cast<ssize_t>(index.size()));
  close(fd);
  ScanResult r = g_dir->Scan(g_layout);
  for (const auto& tier : r.tiers) FUZZ_CHECK(tier.empty());  // no entry files exist
  unlink(file.c_str());
  return 0;
}
