#include "filer/http/body.h"

#include <cerrno>
#include <cstring>

#include "shared/http/http_parser.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {
namespace {

constexpr size_t kFillChunk = 64 << 10;
constexpr size_t kMaxPartHeaders = 16 << 10;
constexpr int kMaxSkippedParts = 64;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// The value of parameter key in a header value like `form-data; name="file"; filename="a"`.
std::string Param(std::string_view value, std::string_view key) {
  size_t pos = 0;
  while (pos < value.size()) {
    size_t semi = value.find(';', pos);
    // A quoted value may hold ';': find the end of the quotes first.
    std::string_view item =
        value.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos);
    size_t eq = item.find('=');
    if (eq != std::string_view::npos && http::EqualsIgnoreCase(Trim(item.substr(0, eq)), key)) {
      std::string_view v = Trim(value.substr(pos + eq + 1));
      if (!v.empty() && v.front() == '"') {
        std::string out;
        for (size_t i = 1; i < v.size() && v[i] != '"'; ++i) {
          if (v[i] == '\\' && i + 1 < v.size()) ++i;
          out.push_back(v[i]);
        }
        return out;
      }
      size_t end = v.find(';');
      return std::string(Trim(v.substr(0, end)));
    }
    if (semi == std::string_view::npos) break;
    pos = semi + 1;
  }
  return "";
}

absl::Status Malformed(std::string_view why) {
  return PosixError(EINVAL, StrCat("malformed multipart body: ", why));
}

}  // namespace

absl::Status ReadUpTo(BodySource& body, size_t n, std::string* out) {
  size_t start = out->size();
  out->resize(start + n);
  size_t got = 0;
  while (got < n) {
    auto k = body.Read(out->data() + start + got, n - got);
    if (!k.ok()) {
      out->resize(start + got);
      return k.status();
    }
    if (*k == 0) break;
    got += *k;
  }
  out->resize(start + got);
  return absl::OkStatus();
}

absl::StatusOr<size_t> StringBody::Read(char* buf, size_t n) {
  size_t k = std::min(n, data_.size() - pos_);
  std::memcpy(buf, data_.data() + pos_, k);
  pos_ += k;
  return k;
}

std::string MultipartBoundary(std::string_view content_type) {
  size_t semi = content_type.find(';');
  if (!http::EqualsIgnoreCase(Trim(content_type.substr(0, semi)), "multipart/form-data")) return "";
  if (semi == std::string_view::npos) return "";
  return Param(content_type.substr(semi + 1), "boundary");
}

MultipartFileBody::MultipartFileBody(BodySource* in, std::string boundary)
    : in_(in), dash_boundary_("--" + boundary), delimiter_("\r\n--" + boundary) {}

absl::StatusOr<bool> MultipartFileBody::Fill() {
  if (in_done_) return false;
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  size_t old = buf_.size();
  buf_.resize(old + kFillChunk);
  auto n = in_->Read(buf_.data() + old, kFillChunk);
  if (!n.ok()) {
    buf_.resize(old);
    return n.status();
  }
  buf_.resize(old + *n);
  if (*n == 0) in_done_ = true;
  return *n > 0;
}

absl::StatusOr<bool> MultipartFileBody::NextPart() {
  // The first delimiter may start the body (no CRLF before it); later ones follow a CRLF.
  for (;;) {
    std::string_view rest = std::string_view(buf_).substr(pos_);
    size_t at = std::string_view::npos;
    size_t skip = 0;
    if (first_ && rest.substr(0, dash_boundary_.size()) == dash_boundary_) {
      at = 0;
      skip = dash_boundary_.size();
    } else if (size_t k = rest.find(delimiter_); k != std::string_view::npos) {
      at = k;
      skip = delimiter_.size();
    }
    if (at != std::string_view::npos && rest.size() >= at + skip + 2) {
      std::string_view after = rest.substr(at + skip, 2);
      pos_ += at + skip + 2;
      first_ = false;
      if (after == "--") return false;  // the closing delimiter
      if (after == "\r\n") return true;
      // Transport padding (spaces) after the boundary is allowed; anything else is not.
      return Malformed("bad delimiter line");
    }
    // Keep enough bytes to recognise a delimiter split across reads.
    if (at == std::string_view::npos && rest.size() > delimiter_.size() + 2) {
      pos_ = buf_.size() - (delimiter_.size() + 2);
      first_ = false;
    }
    ASSIGN_OR_RETURN(bool more, Fill());
    if (!more) return Malformed("no closing boundary");
  }
}

absl::StatusOr<bool> MultipartFileBody::ParsePartHeaders() {
  size_t end;
  while ((end = std::string_view(buf_).substr(pos_).find("\r\n\r\n")) == std::string_view::npos &&
         !(std::string_view(buf_).substr(pos_, 2) == "\r\n")) {
    if (buf_.size() - pos_ > kMaxPartHeaders) return Malformed("part headers too long");
    ASSIGN_OR_RETURN(bool more, Fill());
    if (!more) return Malformed("body ends in part headers");
  }
  filename_.clear();
  content_type_.clear();
  std::string name;
  if (std::string_view(buf_).substr(pos_, 2) == "\r\n") {  // a part with no headers
    pos_ += 2;
    return false;
  }
  std::string_view headers = std::string_view(buf_).substr(pos_, end);
  pos_ += end + 4;
  bool has_filename = false;
  size_t p = 0;
  while (p <= headers.size()) {
    size_t eol = headers.find("\r\n", p);
    if (eol == std::string_view::npos) eol = headers.size();
    std::string_view line = headers.substr(p, eol - p);
    p = eol + 2;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = Trim(line.substr(0, colon)), value = Trim(line.substr(colon + 1));
    if (http::EqualsIgnoreCase(key, "Content-Disposition")) {
      name = Param(value, "name");
      has_filename = value.find("filename") != std::string_view::npos;
      filename_ = Param(value, "filename");
    } else if (http::EqualsIgnoreCase(key, "Content-Type")) {
      content_type_ = std::string(value);
    }
  }
  // A browser sends the full client path on some systems; only the last name counts.
  if (size_t slash = filename_.find_last_of("/\\"); slash != std::string::npos)
    filename_.erase(0, slash + 1);
  return has_filename || name == "file";
}

absl::Status MultipartFileBody::Open() {
  for (int i = 0; i < kMaxSkippedParts; ++i) {
    ASSIGN_OR_RETURN(bool part, NextPart());
    if (!part) return Malformed("no file part");
    ASSIGN_OR_RETURN(bool is_file, ParsePartHeaders());
    if (is_file) return absl::OkStatus();
  }
  return Malformed("too many parts before the file");
}

absl::StatusOr<size_t> MultipartFileBody::Read(char* buf, size_t n) {
  if (part_done_ || n == 0) return 0;
  for (;;) {
    std::string_view rest = std::string_view(buf_).substr(pos_);
    size_t k = rest.find(delimiter_);
    if (k != std::string_view::npos) {
      if (k == 0) {
        part_done_ = true;  // the rest (other parts, epilogue) is left unread
        return 0;
      }
      size_t take = std::min(n, k);
      std::memcpy(buf, rest.data(), take);
      pos_ += take;
      return take;
    }
    // Bytes that cannot be the start of a delimiter are safe to hand out.
    if (rest.size() > delimiter_.size()) {
      size_t take = std::min(n, rest.size() - delimiter_.size());
      std::memcpy(buf, rest.data(), take);
      pos_ += take;
      return take;
    }
    ASSIGN_OR_RETURN(bool more, Fill());
    if (!more) return Malformed("no closing boundary after the file");
  }
}

}  // namespace kelp::filer
