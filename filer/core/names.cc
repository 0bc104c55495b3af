#include "filer/core/names.h"

#include <cerrno>

#include "filer/client/limits.h"
#include "shared/status.h"

namespace kelp::filer {

absl::Status ValidateName(std::string_view name) {
  if (name.empty()) return PosixError(EINVAL, "empty name");
  if (name.size() > kMaxNameLen) return PosixError(ENAMETOOLONG, "name longer than 255 bytes");
  if (name == "." || name == "..") return PosixError(EINVAL, "name is . or ..");
  if (name.find('/') != std::string_view::npos) return PosixError(EINVAL, "name contains '/'");
  if (name.find('\0') != std::string_view::npos) return PosixError(EINVAL, "name contains NUL");
  return absl::OkStatus();
}

}  // namespace kelp::filer
