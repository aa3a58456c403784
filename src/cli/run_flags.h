// Flags shared by the commands that run the model (logits, generate, ...):
// --threads, --log-level, --quant-simulation, --matmul-kernels.
#pragma once

#include <cstdint>
#include <string>

#include "cli/flags.h"
#include "model/linear.h"

namespace flint::cli {

struct RunFlags {
  int64_t threads = 0;  // 0: one per core
  std::string log_level = "info";
  std::string quant_simulation = "official";
  std::string matmul_kernels = "auto";

  void add_to(FlagParser& parser);
  // Applies threads, log level and matmul kernels; returns the parsed quantisation mode
  // (UsageError if bad).
  QuantSimulation apply() const;
};

QuantSimulation parse_quant_simulation(const std::string& text);

}  // namespace flint::cli
