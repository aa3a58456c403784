#include "cli/run_flags.h"

#include "base/log.h"
#include "base/thread_pool.h"
#include "cli/ranks.h"
#include "kernels/matmul.h"

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
  parser.add_string(
      "--matmul-kernels",
      "matmul variant: auto (the fastest for decoding that the CPU has; never amx), amx "
      "(Intel AMX tiles: prefill about 1.5x, decoding about 0.7x on a Xeon with AMX-BF16), "
      "avx512bf16, avx512, avx2 or scalar",
      &matmul_kernels);
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
  if (!kernels::set_matmul_isa(matmul_kernels == "auto" ? "" : matmul_kernels)) {
    std::string have;
    for (std::string_view isa : kernels::matmul_isas()) have += " " + std::string(isa);
    throw UsageError("--matmul-kernels: '{}' is not available here (this CPU has:{})",
                     matmul_kernels, have);
  }
  return sim;
}

}  // namespace flint::cli
