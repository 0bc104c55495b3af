// RocksDB's CRC32C computed with SSE4.2 (rocksdb_crc32c.cc): the library's own, as Debian
// builds it, is table-driven.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kelp::filer {

// What librocksdb's calls to rocksdb::crc32c::Extend run: the CRC-32C of data[0, n) continued
// from crc, the CRC-32C of what came before.
uint32_t RocksCrc32cExtend(uint32_t crc, const char* data, size_t n);
// The library's own definition (tests compare the two).
uint32_t RocksCrc32cExtendOfLibrary(uint32_t crc, const char* data, size_t n);
// "sse4.2", or "rocksdb" when the CPU lacks it and the library's own runs.
const char* RocksCrc32cImplementation();

}  // namespace kelp::filer
