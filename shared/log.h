// Logging goes through spdlog (thread-safe). InitLogging sets the format and level once, at
// process start; after that call spdlog::info(...) and friends from any thread.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

#include "shared/strings.h"  // fmt formatters for absl::Status and absl::string_view

namespace kelp {

// level: "debug", "info", "warn", "error". Logs go to stderr.
void InitLogging(std::string_view level);

}  // namespace kelp
