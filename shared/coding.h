// Byte coding for every binary format Kelp writes, whatever the host's byte order:
// - little-endian fixed-width integers at a pointer: the needle and volume index
//   (docs/needle-format.md), the mount's cache files (docs/cache-format.md), RPC frames
//   (docs/rpc-protocol.md);
// - big-endian fixed-width integers, in the filer's keys so that byte order is numeric order
//   (docs/filer-keys.md);
// - LEB128 varints, zigzag varints for signed values and varint-length-prefixed strings, in
//   the filer's values (docs/filer-keys.md).
// A change here changes those formats: shared/coding_test.cc pins the bytes.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kelp {

namespace coding_internal {

template <typename T>
inline void EncodeLE(char* dst, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
template <typename T>
inline T DecodeLE(const char* src) {
  T v = 0;
  for (size_t i = sizeof(T); i-- > 0;) v = static_cast<T>((v << 8) | static_cast<uint8_t>(src[i]));
  return v;
}
template <typename T>
inline void PutBE(std::string* out, T v) {
  char buf[sizeof(T)];
  for (size_t i = sizeof(T); i-- > 0;) {
    buf[i] = static_cast<char>(v & 0xff);
    v = static_cast<T>(v >> 8);
  }
  out->append(buf, sizeof(T));
}
template <typename T>
inline bool GetBE(std::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  T r = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    r = static_cast<T>((r << 8) | static_cast<uint8_t>((*in)[i]));
  in->remove_prefix(sizeof(T));
  *v = r;
  return true;
}

}  // namespace coding_internal

// ---- Little-endian, fixed width: dst/src must hold 2, 4 or 8 bytes. ----
inline void EncodeFixed16LE(char* dst, uint16_t v) { coding_internal::EncodeLE(dst, v); }
inline void EncodeFixed32LE(char* dst, uint32_t v) { coding_internal::EncodeLE(dst, v); }
inline void EncodeFixed64LE(char* dst, uint64_t v) { coding_internal::EncodeLE(dst, v); }
inline uint16_t DecodeFixed16LE(const char* src) {
  return coding_internal::DecodeLE<uint16_t>(src);
}
inline uint32_t DecodeFixed32LE(const char* src) {
  return coding_internal::DecodeLE<uint32_t>(src);
}
inline uint64_t DecodeFixed64LE(const char* src) {
  return coding_internal::DecodeLE<uint64_t>(src);
}

// ---- Big-endian, fixed width. ----
inline void PutFixed32BE(std::string* out, uint32_t v) { coding_internal::PutBE(out, v); }
inline void PutFixed64BE(std::string* out, uint64_t v) { coding_internal::PutBE(out, v); }
// Read the integer at the front of *in and advance past it; false (and *in untouched) if
// *in is too short.
inline bool GetFixed32BE(std::string_view* in, uint32_t* v) {
  return coding_internal::GetBE(in, v);
}
inline bool GetFixed64BE(std::string_view* in, uint64_t* v) {
  return coding_internal::GetBE(in, v);
}
// The integer in the first 8 bytes of in; 0 if in is shorter.
inline uint64_t DecodeFixed64BE(std::string_view in) {
  uint64_t v = 0;
  GetFixed64BE(&in, &v);
  return v;
}

// ---- Varints: unsigned LEB128, at most 10 bytes. ----
inline void PutVarint64(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint at the front of *in and advances past it; false if *in ends inside it or it
// runs past 10 bytes.
inline bool GetVarint64(std::string_view* in, uint64_t* v) {
  uint64_t r = 0;
  for (int shift = 0; shift <= 63 && !in->empty(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    r |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

// Signed values (times before the epoch, counters) zigzag-encoded: 0, -1, 1, -2... as 0, 1, 2, 3...
inline void PutVarsint64(std::string* out, int64_t v) {
  PutVarint64(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

inline bool GetVarsint64(std::string_view* in, int64_t* v) {
  uint64_t u = 0;
  if (!GetVarint64(in, &u)) return false;
  *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

// A byte string after its length as a varint.
inline void PutLengthPrefixed(std::string* out, std::string_view s) {
  PutVarint64(out, s.size());
  out->append(s);
}

inline bool GetLengthPrefixed(std::string_view* in, std::string_view* s) {
  uint64_t n = 0;
  if (!GetVarint64(in, &n) || n > in->size()) return false;
  *s = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

}  // namespace kelp
