#include "volume/http/request_parsing.h"

#include "shared/http/http_parser.h"
#include "shared/strings.h"

namespace kelp::volume {
namespace {

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && http::EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

}  // namespace

absl::StatusOr<FileId> ParseFidPath(std::string_view path) {
  auto bad = [&] {
    return absl::InvalidArgumentError(kelp::StrCat("malformed file id path \"", path, "\""));
  };
  if (path.size() < 2 || path[0] != '/') return bad();
  std::string_view p = path.substr(1);
  std::string fid;
  if (size_t comma = p.find(','); comma != std::string_view::npos) {
    if (p.find('/') != std::string_view::npos) return bad();
    fid = std::string(p);
  } else {
    size_t slash = p.find('/');
    if (slash == std::string_view::npos) return bad();
    std::string_view vid = p.substr(0, slash);
    std::string_view rest = p.substr(slash + 1);
    if (size_t s2 = rest.find('/'); s2 != std::string_view::npos) {
      std::string_view name = rest.substr(s2 + 1);
      if (name.empty() || name.find('/') != std::string_view::npos) return bad();
      rest = rest.substr(0, s2);
    }
    fid = kelp::StrCat(vid, ",", rest);
  }
  // A trailing extension (".jpg") is decoration.
  if (size_t dot = fid.find('.', fid.find(',')); dot != std::string::npos) fid.resize(dot);
  auto id = FileId::Parse(fid);
  if (!id.ok()) return bad();
  return id;
}

bool IsMultipart(std::string_view content_type) {
  return StartsWithIgnoreCase(http::TrimOws(content_type), "multipart/form-data");
}

absl::StatusOr<MultipartFile> ParseMultipartFile(std::string_view content_type,
                                                 std::string_view body) {
  // boundary=... among the parameters, possibly quoted.
  std::string_view boundary;
  for (std::string_view rest = content_type; !rest.empty();) {
    size_t semi = rest.find(';');
    std::string_view param = http::TrimOws(rest.substr(0, semi));
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    if (StartsWithIgnoreCase(param, "boundary=")) {
      boundary = param.substr(9);
      if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"') {
        boundary = boundary.substr(1, boundary.size() - 2);
      }
    }
  }
  if (boundary.empty() || boundary.size() > 200) {
    return absl::InvalidArgumentError("multipart/form-data without a usable boundary");
  }
  const std::string delim = kelp::StrCat("--", boundary);
  const std::string next_delim = kelp::StrCat("\r\n", delim);
  size_t pos = body.find(delim);
  if (pos == std::string_view::npos)
    return absl::InvalidArgumentError("multipart body without its boundary");
  std::optional<MultipartFile> first;
  for (;;) {
    pos += delim.size();
    if (body.substr(pos, 2) == "--") break;  // closing delimiter
    size_t line_end = body.find("\r\n", pos);
    if (line_end == std::string_view::npos) break;
    size_t headers_end = body.find("\r\n\r\n", line_end);
    if (headers_end == std::string_view::npos)
      return absl::InvalidArgumentError("multipart part without headers end");
    std::string_view headers = body.substr(line_end + 2, headers_end - line_end - 2);
    size_t data_start = headers_end + 4;
    size_t data_end = body.find(next_delim, data_start);
    if (data_end == std::string_view::npos)
      return absl::InvalidArgumentError("multipart part not terminated");
    MultipartFile part;
    part.data = body.substr(data_start, data_end - data_start);
    // filename="..." in the Content-Disposition line.
    for (std::string_view h = headers; !h.empty();) {
      size_t eol = h.find("\r\n");
      std::string_view line = h.substr(0, eol);
      h = eol == std::string_view::npos ? std::string_view() : h.substr(eol + 2);
      if (!StartsWithIgnoreCase(line, "content-disposition:")) continue;
      size_t fn = line.find("filename=\"");
      if (fn == std::string_view::npos) continue;
      size_t close = line.find('"', fn + 10);
      if (close != std::string_view::npos) part.filename = line.substr(fn + 10, close - fn - 10);
    }
    if (!part.filename.empty()) return part;
    if (!first) first = part;
    pos = data_end + 2;
  }
  if (first) return *first;
  return absl::InvalidArgumentError("multipart body has no parts");
}

}  // namespace kelp::volume
