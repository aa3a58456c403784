// Sub-commands of the `flint` executable. Each command lives in its own cmd_<name>.cpp
// and registers itself with FLINT_COMMAND; main.cpp dispatches on the first argument.
//
// A command receives its arguments without the program and command names, returns the
// process exit code (0 success, 1 failure, 2 usage error), and may throw flint::Error for
// anything the user caused: main prints it as "flint <command>: error: ..." and exits 1.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flint::cli {

using CommandFn = int (*)(std::span<const std::string> args);

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `flint --help`
  CommandFn run;
};

// Returns true so that it can initialise a static (see FLINT_COMMAND).
bool register_command(const Command& command);
const std::vector<Command>& commands();

// Exit codes shared by all commands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace flint::cli

#define FLINT_COMMAND_CONCAT_(a, b) a##b
#define FLINT_COMMAND_CONCAT(a, b) FLINT_COMMAND_CONCAT_(a, b)
#define FLINT_COMMAND(name, summary, fn)                                        \
  static const bool FLINT_COMMAND_CONCAT(flint_command_registered_, __LINE__) = \
      ::flint::cli::register_command({name, summary, fn})
