// Argument checks shared by the operations. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace kelp::filer {

// A directory entry name: EINVAL if empty, ".", "..", or containing '/' or NUL;
// ENAMETOOLONG beyond kMaxNameLen bytes.
absl::Status ValidateName(std::string_view name);

}  // namespace kelp::filer
