#include "shared/http/range.h"

#include "shared/http/http_parser.h"
#include "shared/strings.h"

namespace kelp::http {
namespace {

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;  // digits only, no sign, no overflow
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return ParseInt(s, out);
}

std::string_view Unquote(std::string_view tag) {
  if (tag.size() >= 2 && tag.front() == '"' && tag.back() == '"')
    return tag.substr(1, tag.size() - 2);
  return tag;
}

}  // namespace

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool EtagMatches(std::string_view if_none_match, std::string_view etag) {
  etag = Unquote(etag);
  std::string_view rest = if_none_match;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = TrimOws(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item == "*") return true;
    if (item.substr(0, 2) == "W/") item.remove_prefix(2);
    if (Unquote(item) == etag) return true;
  }
  return false;
}

RangeRequest ParseRange(std::string_view header, uint64_t size) {
  using Kind = RangeRequest::Kind;
  RangeRequest r;
  header = TrimOws(header);
  if (header.empty()) return r;
  size_t eq = header.find('=');
  if (eq == std::string_view::npos || !EqualsIgnoreCase(TrimOws(header.substr(0, eq)), "bytes")) {
    r.kind = Kind::kMalformed;
    return r;
  }
  std::string_view spec = TrimOws(header.substr(eq + 1));
  // Several ranges would need multipart/byteranges; RFC 9110 lets a server answer 200.
  if (spec.find(',') != std::string_view::npos) return r;
  size_t dash = spec.find('-');
  if (dash == std::string_view::npos) {
    r.kind = Kind::kMalformed;
    return r;
  }
  std::string_view first = TrimOws(spec.substr(0, dash)), last = TrimOws(spec.substr(dash + 1));
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

}  // namespace kelp::http
