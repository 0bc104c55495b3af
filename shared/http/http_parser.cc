#include "shared/http/http_parser.h"

#include <charconv>
#include <cstring>

#include "absl/strings/ascii.h"
#include "shared/strings.h"

namespace kelp::http {
namespace {

bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr size_t kMaxHeaders = 100;

// Splits the head into lines (without terminators). Returns the head length including the
// blank line, 0 if incomplete.
size_t FindHeadEnd(std::string_view buf) {
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != '\n') continue;
    // A line ending at i; the head ends at an empty line.
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return 0;
}

ParseResult Error(int status, std::string msg) {
  ParseResult r;
  r.kind = ParseResult::kError;
  r.status = status;
  r.error = std::move(msg);
  return r;
}

// Parses header lines in [lines_begin, head_end) into out; fills framing.
ParseResult ParseFields(std::string_view head, Headers* out, BodyFraming* framing) {
  bool have_cl = false, have_te = false;
  int64_t cl = 0;
  size_t count = 0;
  while (!head.empty()) {
    size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    if (line[0] == ' ' || line[0] == '\t') return Error(400, "obsolete header line folding");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return Error(400, "malformed header line");
    std::string_view name = line.substr(0, colon);
    for (char c : name) {
      if (!IsTokenChar(c)) return Error(400, "invalid character in header name");
    }
    std::string_view value = TrimOws(line.substr(colon + 1));
    for (char c : value) {
      if (c == '\0' || c == '\r' || c == '\n') return Error(400, "invalid character in header value");
    }
    if (++count > kMaxHeaders) return Error(431, "too many header fields");
    if (EqualsIgnoreCase(name, "Content-Length")) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || p != value.data() + value.size() || v < 0) {
        return Error(400, "invalid Content-Length");
      }
      if (have_cl && v != cl) return Error(400, "conflicting Content-Length");
      have_cl = true;
      cl = v;
    } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
      if (!EqualsIgnoreCase(value, "chunked")) return Error(501, "unsupported Transfer-Encoding");
      have_te = true;
    }
    out->Add(name, value);
  }
  if (have_cl && have_te) return Error(400, "both Content-Length and Transfer-Encoding");
  framing->chunked = have_te;
  framing->content_length = have_cl ? cl : 0;
  framing->until_close = false;
  ParseResult ok;
  ok.kind = ParseResult::kOk;
  return ok;
}

bool ParseVersion(std::string_view v, int* minor) {
  if (v == "HTTP/1.1") {
    *minor = 1;
    return true;
  }
  if (v == "HTTP/1.0") {
    *minor = 0;
    return true;
  }
  return false;
}

bool ConnectionHas(const Headers& h, std::string_view token) {
  std::string_view v = h.Get("Connection");
  while (!v.empty()) {
    size_t comma = v.find(',');
    if (EqualsIgnoreCase(TrimOws(v.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) !=
        absl::ascii_tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view Headers::Get(std::string_view name) const {
  for (const auto& [k, v] : items_) {
    if (EqualsIgnoreCase(k, name)) return v;
  }
  return {};
}

bool Headers::Has(std::string_view name) const {
  for (const auto& [k, v] : items_) {
    if (EqualsIgnoreCase(k, name)) return true;
  }
  return false;
}

void Headers::Add(std::string_view name, std::string_view value) {
  items_.emplace_back(std::string(name), std::string(value));
}

void Headers::Set(std::string_view name, std::string_view value) {
  std::erase_if(items_, [&](const auto& kv) { return EqualsIgnoreCase(kv.first, name); });
  Add(name, value);
}

ParseResult ParseRequestHead(std::string_view buf, RequestHead* out) {
  // Tolerate stray CRLFs before a request line (RFC 9112 section 2.2).
  size_t skip = 0;
  while (skip < buf.size() && (buf[skip] == '\r' || buf[skip] == '\n')) ++skip;
  std::string_view rest = buf.substr(skip);
  size_t end = FindHeadEnd(rest);
  if (end == 0) {
    // Reject garbage early rather than waiting for a head that will never parse.
    size_t nl = rest.find('\n');
    std::string_view first = rest.substr(0, nl == std::string_view::npos ? rest.size() : nl);
    for (char c : first.substr(0, std::min<size_t>(first.size(), 16))) {
      if (c == ' ') break;
      if (!IsTokenChar(c) && c != '\r') return Error(400, "malformed request line");
    }
    return ParseResult{};
  }
  std::string_view head = rest.substr(0, end);
  size_t nl = head.find('\n');
  std::string_view line = head.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0) {
    return Error(400, "malformed request line");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (!IsTokenChar(c)) return Error(400, "malformed method");
  }
  if (!ParseVersion(version, &out->version_minor)) {
    // 505 only for a real HTTP version we do not speak; anything else is not HTTP at all.
    if (version.substr(0, 5) == "HTTP/") return Error(505, "unsupported HTTP version");
    return Error(400, "malformed request line");
  }
  if (target.empty() || target[0] != '/') return Error(400, "request target must start with /");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return Error(400, "invalid character in request target");
  }
  out->method = std::string(method);
  out->target = std::string(target);
  size_t q = target.find('?');
  auto path = PercentDecode(target.substr(0, q), false);
  if (!path) return Error(400, "malformed percent-encoding in path");
  out->path = std::move(*path);
  out->query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  out->headers.Clear();
  ParseResult r = ParseFields(head.substr(nl + 1), &out->headers, &out->framing);
  if (r.kind != ParseResult::kOk) return r;
  if (out->version_minor == 1 && !out->headers.Has("Host")) return Error(400, "missing Host header");
  out->keep_alive = out->version_minor == 1 ? !ConnectionHas(out->headers, "close")
                                            : ConnectionHas(out->headers, "keep-alive");
  out->expect_continue = EqualsIgnoreCase(out->headers.Get("Expect"), "100-continue");
  r.consumed = skip + end;
  return r;
}

ParseResult ParseResponseHead(std::string_view buf, std::string_view request_method, ResponseHead* out) {
  size_t end = FindHeadEnd(buf);
  if (end == 0) return ParseResult{};
  std::string_view head = buf.substr(0, end);
  size_t nl = head.find('\n');
  std::string_view line = head.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || !ParseVersion(line.substr(0, sp1), &out->version_minor)) {
    return Error(502, "malformed status line");
  }
  std::string_view code = line.substr(sp1 + 1, 3);
  auto [p, ec] = std::from_chars(code.data(), code.data() + code.size(), out->status);
  if (ec != std::errc() || code.size() != 3 || out->status < 100) return Error(502, "malformed status code");
  out->reason = line.size() > sp1 + 5 ? std::string(line.substr(sp1 + 5)) : "";
  out->headers.Clear();
  ParseResult r = ParseFields(head.substr(nl + 1), &out->headers, &out->framing);
  if (r.kind != ParseResult::kOk) return r;
  bool no_body = request_method == "HEAD" || out->status == 204 || out->status == 304 ||
                 (out->status >= 100 && out->status < 200);
  if (no_body) {
    out->framing = BodyFraming{};
  } else if (!out->framing.chunked && !out->headers.Has("Content-Length")) {
    out->framing.until_close = true;
  }
  out->keep_alive = out->version_minor == 1 ? !ConnectionHas(out->headers, "close")
                                            : ConnectionHas(out->headers, "keep-alive");
  if (out->framing.until_close) out->keep_alive = false;
  r.consumed = end;
  return r;
}

std::optional<std::string> PercentDecode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = HexVal(s[i + 1]), lo = HexVal(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {
std::string PercentEncode(std::string_view s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}
}  // namespace

std::string PercentEncodePath(std::string_view s) { return PercentEncode(s, true); }
std::string PercentEncodeQuery(std::string_view s) { return PercentEncode(s, false); }

std::optional<std::string> QueryParam(std::string_view raw_query, std::string_view key) {
  while (!raw_query.empty()) {
    size_t amp = raw_query.find('&');
    std::string_view pair = raw_query.substr(0, amp);
    raw_query.remove_prefix(amp == std::string_view::npos ? raw_query.size() : amp + 1);
    size_t eq = pair.find('=');
    std::string_view k = pair.substr(0, eq);
    auto dk = PercentDecode(k, true);
    if (!dk || *dk != key) continue;
    if (eq == std::string_view::npos) return std::string();
    auto v = PercentDecode(pair.substr(eq + 1), true);
    return v ? *v : std::string(pair.substr(eq + 1));
  }
  return std::nullopt;
}

int64_t ChunkedDecoder::Decode(std::string_view in, std::string* out, size_t max_out) {
  size_t i = 0;
  while (i < in.size() && state_ != kDone) {
    char c = in[i];
    switch (state_) {
      case kSize: {
        int h = HexVal(c);
        if (h >= 0) {
          if (++size_digits_ > 15) return -1;
          remaining_ = remaining_ * 16 + h;
          ++i;
        } else if (size_digits_ == 0) {
          return -1;
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = kSizeExt;
          ++i;
        } else if (c == '\r') {
          state_ = kSizeLf;
          ++i;
        } else if (c == '\n') {
          ++i;
          state_ = remaining_ == 0 ? kTrailer : kData;
        } else {
          return -1;
        }
        break;
      }
      case kSizeExt:
        if (c == '\n') state_ = remaining_ == 0 ? kTrailer : kData;
        ++i;
        break;
      case kSizeLf:
        if (c != '\n') return -1;
        ++i;
        state_ = remaining_ == 0 ? kTrailer : kData;
        trailer_line_empty_ = true;
        break;
      case kData: {
        if (out->size() >= max_out) return static_cast<int64_t>(i);
        size_t n = std::min<uint64_t>({remaining_, in.size() - i, max_out - out->size()});
        out->append(in.data() + i, n);
        i += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = kDataCr;
        break;
      }
      case kDataCr:
        if (c == '\r') {
          state_ = kDataLf;
          ++i;
        } else if (c == '\n') {
          state_ = kSize;
          size_digits_ = 0;
          ++i;
        } else {
          return -1;
        }
        break;
      case kDataLf:
        if (c != '\n') return -1;
        ++i;
        state_ = kSize;
        size_digits_ = 0;
        break;
      case kTrailer:
        // Trailer fields are ignored; an empty line ends the message.
        if (c == '\r') {
          state_ = kTrailerLf;
        } else if (c == '\n') {
          if (trailer_line_empty_) state_ = kDone;
          trailer_line_empty_ = true;
        } else {
          trailer_line_empty_ = false;
        }
        ++i;
        break;
      case kTrailerLf:
        if (c != '\n') return -1;
        ++i;
        if (trailer_line_empty_) {
          state_ = kDone;
        } else {
          state_ = kTrailer;
          trailer_line_empty_ = true;
        }
        break;
      case kDone: break;
    }
  }
  return static_cast<int64_t>(i);
}

const char* StatusText(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "Unknown";
  }
}

}  // namespace kelp::http
