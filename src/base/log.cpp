#include "base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <array>
#include <mutex>

#include "base/error.h"

namespace flint {

void init_logging(std::string_view level) {
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("flint");
    logger->set_pattern("%^%L%$ %H:%M:%S.%e %v");
    spdlog::set_default_logger(logger);
  });
  static constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 8> kLevels{{
      {"trace", spdlog::level::trace},
      {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},
      {"warning", spdlog::level::warn},
      {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},
      {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  }};
  for (const auto& [name, value] : kLevels) {
    if (name == level) {
      spdlog::set_level(value);
      return;
    }
  }
  throw Error(
      "unknown log level '{}': expected trace, debug, info, warning, error, critical or off",
      level);
}

}  // namespace flint
