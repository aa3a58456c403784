#include "cli/run_flags.h"

#include "base/log.h"
#include "base/thread_pool.h"
#include "cli/ranks.h"

namespace flint::cli {

void RunFlags::add_to(FlagParser& parser) {
  parser.add_int("--threads", "worker threads for the kernels; 0 = one per physical core",
                 &threads);
  parser.add_string("--log-level", "trace, debug, info, warning, error or off", &log_level);
  parser.add_string(
      "--quant-simulation",
      "official: round activations as DeepSeek's inference code does (FP8 linear inputs, FP8 KV, "
      "FP4 indexer), as the model was trained; off: keep them in float32 (to compare with "
      "llama.cpp)",
      &quant_simulation);
}

QuantSimulation parse_quant_simulation(const std::string& text) {
  if (text == "official") return QuantSimulation::kOfficial;
  if (text == "off") return QuantSimulation::kOff;
  throw UsageError("--quant-simulation must be official or off, got '{}'", text);
}

QuantSimulation RunFlags::apply() const {
  QuantSimulation sim = parse_quant_simulation(quant_simulation);
  if (threads < 0) throw UsageError("--threads must be >= 0, got {}", threads);
  try {
    init_logging(log_level);
  } catch (const Error& e) {
    throw UsageError("--log-level: {}", e.what());
  }
  set_thread_count(threads_for_this_rank(threads));
  return sim;
}

}  // namespace flint::cli
