#include "shared/json.h"

#include <cstdint>
#include <cstdio>

namespace kelp {
namespace {

// Length of the valid UTF-8 sequence at s[i], 0 if there is none.
size_t Utf8Len(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
      // Runs of plain ASCII are the common case: copy them in one go.
      size_t j = i + 1;
      while (j < s.size()) {
        auto d = static_cast<unsigned char>(s[j]);
        if (d < 0x20 || d == '"' || d == '\\' || d >= 0x80) break;
        ++j;
      }
      out->append(s.data() + i, j - i);
      i = j;
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        ++i;
        continue;
      case '\\':
        out->append("\\\\");
        ++i;
        continue;
      case '\n':
        out->append("\\n");
        ++i;
        continue;
      case '\r':
        out->append("\\r");
        ++i;
        continue;
      case '\t':
        out->append("\\t");
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out->append(buf);
      ++i;
      continue;
    }
    size_t n = Utf8Len(s, i);
    if (n == 0) {
      out->append("\xEF\xBF\xBD");
      ++i;
    } else {
      out->append(s.data() + i, n);
      i += n;
    }
  }
  out->push_back('"');
}

std::string JsonString(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

}  // namespace kelp
