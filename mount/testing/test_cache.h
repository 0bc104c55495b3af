// Options of a TieredCache for tests of the mount's read path: in dir, capacity bytes, 4 MiB
// chunks (the mount's default chunk size).
#pragma once

#include <cstdint>
#include <string>

#include "mount/cache/cache_options.h"

namespace kelp::mount {

inline cache::CacheOptions TestCacheOptions(const std::string& dir, uint64_t capacity_bytes = 64 << 20) {
  cache::CacheOptions o;
  o.dir = dir;
  o.capacity_bytes = capacity_bytes;
  o.chunk_size_limit = 4 << 20;
  return o;
}

}  // namespace kelp::mount
