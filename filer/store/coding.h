// Byte encodings used by the filer's key layout (docs/filer-keys.md): big-endian fixed-width
// integers in keys (so byte order is numeric order) and LEB128 varints in values.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kelp::filer {

inline void PutFixed64BE(std::string* out, uint64_t v) {
  char buf[8];
  for (int i = 7; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  out->append(buf, 8);
}

inline void PutFixed32BE(std::string* out, uint32_t v) {
  char buf[4];
  for (int i = 3; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  out->append(buf, 4);
}

// Reads 8 bytes at the front of *in and advances it; false if too short.
inline bool GetFixed64BE(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  uint64_t r = 0;
  for (int i = 0; i < 8; ++i) r = (r << 8) | static_cast<uint8_t>((*in)[i]);
  in->remove_prefix(8);
  *v = r;
  return true;
}

inline uint64_t DecodeFixed64BE(std::string_view in) {
  uint64_t v = 0;
  GetFixed64BE(&in, &v);
  return v;
}

inline void PutVarint64(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

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

// Signed values (times before the epoch, counters) zigzag-encoded.
inline void PutVarsint64(std::string* out, int64_t v) {
  PutVarint64(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

inline bool GetVarsint64(std::string_view* in, int64_t* v) {
  uint64_t u = 0;
  if (!GetVarint64(in, &u)) return false;
  *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
  return true;
}

// A length-prefixed byte string.
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

}  // namespace kelp::filer
