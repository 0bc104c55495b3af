// RocksDB's CRC32C with the CPU's crc32 instruction.
//
// Debian builds RocksDB portable, without SSE4.2, so every WAL record, table block and blob
// record is summed by the table-driven Slow_CRC32: 15 % of the filer's CPU under sysbench
// rndrw with 16 threads (each journaled write is summed twice: in the WAL, then in a blob file
// at the flush). The programs link librocksdb.a with `--wrap` on rocksdb::crc32c::Extend
// (filer/CMakeLists.txt), so the library's calls to it, from its other objects, come here.
// Same function, same results (the CRC-32C of RFC 3720); on a CPU without SSE4.2 the
// library's own runs.
#include "filer/store/rocksdb_crc32c.h"

#include <nmmintrin.h>

#include <cstring>

// The library's definition, under the name --wrap gives it.
uint32_t RealRocksCrc32cExtend(uint32_t crc, const char* p,
                               size_t n) asm("__real__ZN7rocksdb6crc32c6ExtendEjPKcm");
// What the library's calls reach.
uint32_t WrapRocksCrc32cExtend(uint32_t crc, const char* p,
                               size_t n) asm("__wrap__ZN7rocksdb6crc32c6ExtendEjPKcm");

namespace {

using ExtendFn = uint32_t (*)(uint32_t, const char*, size_t);

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const char* p, size_t n) {
  uint64_t c = crc ^ 0xffffffffu;
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), static_cast<uint8_t>(*p++));
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  for (; n > 0; --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), static_cast<uint8_t>(*p++));
  return static_cast<uint32_t>(c) ^ 0xffffffffu;
}

ExtendFn Chosen() {
  static const ExtendFn fn = __builtin_cpu_supports("sse4.2") ? ExtendSse42 : RealRocksCrc32cExtend;
  return fn;
}

}  // namespace

uint32_t WrapRocksCrc32cExtend(uint32_t crc, const char* p, size_t n) {
  return Chosen()(crc, p, n);
}

namespace kelp::filer {

uint32_t RocksCrc32cExtend(uint32_t crc, const char* data, size_t n) {
  return WrapRocksCrc32cExtend(crc, data, n);
}
uint32_t RocksCrc32cExtendOfLibrary(uint32_t crc, const char* data, size_t n) {
  return RealRocksCrc32cExtend(crc, data, n);
}
const char* RocksCrc32cImplementation() { return Chosen() == ExtendSse42 ? "sse4.2" : "rocksdb"; }

}  // namespace kelp::filer
