#include "filer/http/range.h"

#include "shared/http/http_parser.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;  // digits only, no sign, no overflow
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return ParseInt(s, out);
}

}  // namespace

RangeRequest ParseRange(std::string_view header, uint64_t size) {
  using Kind = RangeRequest::Kind;
  RangeRequest r;
  header = Trim(header);
  if (header.empty()) return r;
  size_t eq = header.find('=');
  if (eq == std::string_view::npos || !http::EqualsIgnoreCase(Trim(header.substr(0, eq)), "bytes")) {
    r.kind = Kind::kMalformed;
    return r;
  }
  std::string_view spec = Trim(header.substr(eq + 1));
  // Several ranges would need multipart/byteranges; RFC 9110 lets a server answer 200.
  if (spec.find(',') != std::string_view::npos) return r;
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) {
    r.kind = Kind::kMalformed;
    return r;
  }
  std::string_view first = Trim(spec.substr(0, dash)), last = Trim(spec.substr(dash + 1));
  uint64_t a = 0, b = 0;
  if (first.empty()) {  // suffix: the last n bytes
    if (!ParseU64(last, &b)) {
      r.kind = Kind::kMalformed;
      return r;
    }
    if (b == 0 || size == 0) {
      r.kind = Kind::kUnsatisfiable;
      return r;
    }
    r.kind = Kind::kPartial;
    r.length = b < size ? b : size;
    r.offset = size - r.length;
    return r;
  }
  if (!ParseU64(first, &a) || (!last.empty() && (!ParseU64(last, &b) || b < a))) {
    r.kind = Kind::kMalformed;
    return r;
  }
  if (a >= size) {
    r.kind = Kind::kUnsatisfiable;
    return r;
  }
  uint64_t end = last.empty() || b >= size ? size - 1 : b;
  r.kind = Kind::kPartial;
  r.offset = a;
  r.length = end - a + 1;
  return r;
}

std::string ContentRange(uint64_t offset, uint64_t length, uint64_t size) {
  return StrCat("bytes ", offset, "-", offset + length - 1, "/", size);
}

}  // namespace kelp::filer
