// The seam between `kelp mount` and the tiered read cache (mount/cache, issue 5): its flags and
// its ChunkCache. cache_hook_tiered.cc wires the real TieredCache when the mount_cache library
// is built; cache_hook_none.cc stands in (same flags, no cache) until then.
//
// Thread-safety: RegisterFlags/Open/Close on the main thread; the ChunkCache it returns is
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "mount/core/chunk_cache.h"
#include "shared/flags.h"

namespace kelp::mount {

class CacheHook {
 public:
  virtual ~CacheHook() = default;
  // Registers -cacheCapacityMB, -cacheDir and the cache's other flags.
  virtual void RegisterFlags(FlagSet* flags) = 0;
  // Opens the cache for chunks of chunk_size bytes; nullptr when it is off. default_dir is
  // the directory used when -cacheDir is not given (DefaultCacheDir in mount_options.h).
  virtual absl::StatusOr<ChunkCache*> Open(uint64_t chunk_size, const std::string& default_dir) = 0;
  // Saves its index and logs its summary; after the last read.
  virtual void Close() = 0;
};

std::unique_ptr<CacheHook> NewCacheHook();

}  // namespace kelp::mount
