#include "filer/http/path.h"

#include <cerrno>

#include "filer/client/limits.h"
#include "shared/status.h"
#include "shared/strings.h"

namespace kelp::filer {

std::string_view CleanPath::dir() const {
  size_t slash = path.rfind('/');
  if (slash == 0 || slash == std::string::npos) return "/";
  return std::string_view(path).substr(0, slash);
}

std::string_view CleanPath::name() const {
  if (is_root()) return "";
  return std::string_view(path).substr(path.rfind('/') + 1);
}

CleanPath CleanPath::Child(std::string_view child) const {
  CleanPath c;
  c.path = is_root() ? StrCat("/", child) : StrCat(path, "/", child);
  return c;
}

absl::StatusOr<CleanPath> CleanHttpPath(std::string_view raw) {
  if (raw.empty()) return PosixError(EINVAL, "path is required");
  if (raw.front() != '/') return PosixError(EINVAL, "path must be absolute (start with '/')");
  if (raw.find('\0') != std::string_view::npos)
    return PosixError(EINVAL, "path contains a NUL byte");
  if (raw.size() > kMaxHttpPathLen) {
    return PosixError(ENAMETOOLONG, StrCat("path longer than ", kMaxHttpPathLen, " bytes"));
  }
  CleanPath out;
  if (raw == "/") {
    out.path = "/";
    return out;
  }
  if (raw.back() == '/') {
    out.trailing_slash = true;
    raw.remove_suffix(1);
  }
  // raw is now "/c1/c2/...": every component must be a valid entry name.
  size_t pos = 1;
  while (pos <= raw.size()) {
    size_t slash = raw.find('/', pos);
    if (slash == std::string_view::npos) slash = raw.size();
    std::string_view comp = raw.substr(pos, slash - pos);
    if (comp.empty()) return PosixError(EINVAL, "path has an empty component ('//')");
    if (comp == "." || comp == "..") {
      return PosixError(EINVAL, StrCat("path has a '", comp, "' component"));
    }
    if (comp.size() > kMaxNameLen) {
      return PosixError(ENAMETOOLONG, StrCat("path component longer than ", kMaxNameLen, " bytes"));
    }
    pos = slash + 1;
  }
  out.path = std::string(raw);
  return out;
}

}  // namespace kelp::filer
