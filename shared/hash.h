// Checksums: xxHash3 (64-bit) everywhere data is verified (needles, cache entries).
#pragma once

#include <cstdint>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kelp {

inline uint64_t Hash64(const void* data, size_t size) { return XXH3_64bits(data, size); }
inline uint64_t Hash64(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

// Incremental xxHash3 for data that arrives in pieces. Not thread-safe.
class Hasher {
 public:
  Hasher() { XXH3_64bits_reset(&state_); }
  void Update(const void* data, size_t size) { XXH3_64bits_update(&state_, data, size); }
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  uint64_t Digest() const { return XXH3_64bits_digest(&state_); }

 private:
  XXH3_state_t state_;
};

}  // namespace kelp
