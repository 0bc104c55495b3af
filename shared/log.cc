#include "shared/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace kelp {

void InitLogging(std::string_view level) {
  static bool once = [] {
    auto logger = spdlog::stderr_color_mt("kelp");
    spdlog::set_default_logger(logger);
    return true;
  }();
  (void)once;
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %t %v");
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace kelp
