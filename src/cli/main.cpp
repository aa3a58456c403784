// The `flint` executable: dispatches to the sub-commands registered with FLINT_COMMAND.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <malloc.h>

#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/ranks.h"

namespace flint::cli {

namespace {
void print_help() {
  auto sorted = commands();
  std::sort(sorted.begin(), sorted.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  fmt::print(
      "flint {} - serves DeepSeek-V4 models (Flash, Flash-0731 with DSpark, Pro) on CPUs\n\n"
      "usage: flint <command> [arguments]\n\ncommands:\n",
      FLINT_VERSION);
  for (const auto& c : sorted) fmt::print("  {:<12} {}\n", c.name, c.summary);
  fmt::print("\n`flint <command> --help` documents each command.\n");
}
}  // namespace

int run_main(int argc, char** argv) {
  init_logging("info");
  remember_command_line(argc, argv);
  // A forward pass allocates activations of megabytes per layer. glibc would map each one
  // fresh (and zero its pages on first touch) and hand the memory back after every pass:
  // a fixed mapping threshold at its 32 MiB maximum and no trimming keep them in the heap.
  // Buffers above that cap come from base/page_cache.h instead.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") {
    fmt::print("flint {}\n", FLINT_VERSION);
    return kExitOk;
  }
  const auto& all = commands();
  auto it =
      std::find_if(all.begin(), all.end(), [&](const Command& c) { return c.name == args[0]; });
  if (it == all.end()) {
    std::vector<std::string> names;
    for (const auto& c : all) names.emplace_back(c.name);
    std::string suggestion = closest_match(args[0], names);
    fmt::print(stderr, "flint: unknown command '{}'{}. Run `flint --help` for the list.\n", args[0],
               suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion));
    return kExitUsage;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    return it->run(rest);
  } catch (const UsageError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "flint {}: usage error: {}\n", it->name, e.what());
    return kExitUsage;
  } catch (const Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "flint {}: error: {}\n", it->name, e.what());
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "flint {}: error: out of memory\n", it->name);
    return kExitFailure;
  } catch (const std::exception& e) {
    // Edges convert library exceptions into flint::Error with context; reaching here means
    // one was missed. Still report it instead of terminating.
    std::fflush(stdout);
    fmt::print(stderr, "flint {}: error: {}\n", it->name, e.what());
    return kExitFailure;
  }
}

}  // namespace flint::cli

int main(int argc, char** argv) { return flint::cli::run_main(argc, argv); }
