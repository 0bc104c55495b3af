// Helpers for the read cache tests: scratch directories, du-style disk usage, deterministic
// blob contents, and a tiny tmpfs for disk-full / read-only scenarios.
// Thread-safety: BlobBytes is a pure function; the RAII classes belong to one test thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <memory>

#include "mount/cache/cache_options.h"
#include "mount/cache/tiered_cache.h"

namespace kelp::mount::cache::testing {

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Sub(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// A tmpfs of `bytes` mounted on a fresh directory; unmounted (even if busy) on destruction.
// ok() is false where mounting is not permitted; tests then skip.
class TmpfsMount {
 public:
  explicit TmpfsMount(uint64_t bytes);
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  bool ok() const { return mounted_; }
  const std::string& path() const { return path_; }
  bool RemountReadOnly();

 private:
  std::string path_;
  bool mounted_ = false;
};

// What `du -s --block-size=1 path` reports: st_blocks * 512 of path and everything below it.
uint64_t DiskUsage(const std::string& path);
// Regular files directly inside dir.
size_t CountFiles(const std::string& dir);
// Polls done every 5 ms for up to 30 s; whether it came true (work the cache does in the
// background).
bool Eventually(const std::function<bool()>& done);

// Deterministic contents of blob fid: bytes [offset, offset + len).
std::string BlobBytes(std::string_view fid, uint64_t offset, size_t len);

// Options for a test cache in dir: private metrics, no disk backoff.
CacheOptions TestOptions(const std::string& dir, uint64_t capacity_bytes);

// Opens a cache that must open.
std::unique_ptr<TieredCache> MustOpen(CacheOptions options);

// The mount's read path against a fake volume server serving BlobBytes: a cache read, else an
// aligned fetch, a copy and an insert. Returns whether the cache hit; *out gets the bytes.
bool ReadThrough(TieredCache& cache, std::string_view fid, uint64_t blob_size, uint64_t offset,
                 size_t len, std::string* out);

// Flips one byte of a file in place.
void FlipByte(const std::string& file, uint64_t offset);

}  // namespace kelp::mount::cache::testing
