#include "mount/cache/cache_test_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "shared/strings.h"

namespace kelp::mount::cache::testing {
namespace {

std::string MakeTempDir(const char* prefix) {
  std::string tmpl = kelp::StrCat("/tmp/", prefix, "XXXXXX");
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

uint64_t g_usage = 0;
int AddUsage(const char*, const struct stat* st, int, struct FTW*) {
  g_usage += static_cast<uint64_t>(st->st_blocks) * 512;
  return 0;
}

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

TempDir::TempDir() : path_(MakeTempDir("kelp-cache-test-")) {}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TmpfsMount::TmpfsMount(uint64_t bytes) : path_(MakeTempDir("kelp-cache-tmpfs-")) {
  std::string opts = kelp::StrCat("size=", bytes, ",mode=0755");
  mounted_ = ::mount("tmpfs", path_.c_str(), "tmpfs", 0, opts.c_str()) == 0;
}

TmpfsMount::~TmpfsMount() {
  if (mounted_ && ::umount(path_.c_str()) != 0) ::umount2(path_.c_str(), MNT_DETACH);
  ::rmdir(path_.c_str());
}

bool TmpfsMount::RemountReadOnly() {
  return ::mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0;
}

uint64_t DiskUsage(const std::string& path) {
  g_usage = 0;  // nftw has no user pointer; tests call this from one thread
  ::nftw(path.c_str(), AddUsage, 16, FTW_PHYS);
  return g_usage;
}

size_t CountFiles(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) ++n;
  }
  return n;
}

bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string BlobBytes(std::string_view fid, uint64_t offset, size_t len) {
  uint64_t seed = Hash64(fid);
  std::string out(len, '\0');
  uint64_t word_index = ~0ull, word = 0;
  for (size_t i = 0; i < len; ++i) {
    uint64_t pos = offset + i;
    if ((pos >> 3) != word_index) {
      word_index = pos >> 3;
      word = Mix(seed ^ word_index);
    }
    out[i] = static_cast<char>(word >> (8 * (pos & 7)));
  }
  return out;
}

CacheOptions TestOptions(const std::string& dir, uint64_t capacity_bytes) {
  CacheOptions o;
  o.dir = dir;
  o.capacity_bytes = capacity_bytes;
  o.metrics = nullptr;
  o.disk_error_backoff_ms = 0;
  return o;
}

std::unique_ptr<TieredCache> MustOpen(CacheOptions options) {
  absl::StatusOr<std::unique_ptr<TieredCache>> cache = TieredCache::Open(std::move(options));
  if (!cache.ok()) throw std::runtime_error(cache.status().ToString());
  return std::move(*cache);
}

bool ReadThrough(TieredCache& cache, std::string_view fid, uint64_t blob_size, uint64_t offset,
                 size_t len, std::string* out) {
  out->assign(len, '\0');
  if (cache.Read(fid, blob_size, offset, len, out->data())) return true;
  TieredCache::ByteRange r = cache.FetchRange(blob_size, offset, len);
  std::string fetched = BlobBytes(fid, r.begin, r.size());
  std::memcpy(out->data(), fetched.data() + (offset - r.begin), len);
  cache.Insert(fid, blob_size, r.begin, fetched);
  return false;
}

void FlipByte(const std::string& file, uint64_t offset) {
  int fd = ::open(file.c_str(), O_RDWR);
  if (fd < 0) throw std::runtime_error("open " + file);
  char c = 0;
  if (::pread(fd, &c, 1, static_cast<off_t>(offset)) != 1) throw std::runtime_error("pread");
  c = static_cast<char>(c ^ 0x5a);
  if (::pwrite(fd, &c, 1, static_cast<off_t>(offset)) != 1) throw std::runtime_error("pwrite");
  ::close(fd);
}

}  // namespace kelp::mount::cache::testing
