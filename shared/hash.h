// Checksums: xxHash3 (64-bit) everywhere data is verified (needles, cache entries), and the
// cache's block keys. The hashing is libxxhash's, called through its x86 dispatch: AVX2 or
// AVX-512 where the CPU has them. Inlining the header instead compiles to its SSE2 code, a third
// of the speed on data in the CPU's cache (a 256 KiB block: 14-17 GB/s against 46 with AVX2 on
// the test machine). On pages just read from disk the memory is the limit either way (a
// sequential read from the mount's cache: 13 % of its samples before, 10 % after).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kelp {

uint64_t Hash64(const void* data, size_t size);
inline uint64_t Hash64(std::string_view s) { return Hash64(s.data(), s.size()); }
// The same bytes under another seed hash to an unrelated value.
uint64_t Hash64WithSeed(std::string_view s, uint64_t seed);

// Incremental xxHash3 for data that arrives in pieces: the digest equals Hash64 of the
// concatenation. Not thread-safe.
class Hasher {
 public:
  Hasher();
  void Update(const void* data, size_t size);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  uint64_t Digest() const;

  static constexpr size_t kStateSize = 576;  // sizeof(XXH3_state_t); hash.cc checks it

 private:
  alignas(64) unsigned char state_[kStateSize];
};

}  // namespace kelp
