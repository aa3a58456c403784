// Logging: spdlog's default logger, writing to stderr so that stdout stays clean for the
// output of commands (token ids, JSON, decoded text).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace flint {

// Sets up the stderr logger once; later calls only change the level.
// `level` is one of trace, debug, info, warning, error, critical, off (throws flint::Error
// on anything else, naming the valid values).
void init_logging(std::string_view level = "info");

}  // namespace flint
