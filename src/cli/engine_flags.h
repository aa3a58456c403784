// Flags of the commands that run the engine (generate, bench): the engine's and the
// sampler's settings under their `vllm serve` / OpenAI names, turned into an EngineConfig
// and SamplingParams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/serve_args.h"
#include "engine/engine_config.h"
#include "engine/sampler.h"
#include "model/deepseek_v4/config.h"

namespace flint::cli {

struct EngineFlags {
  int64_t max_num_seqs = 256;
  std::optional<int64_t> max_num_batched_tokens;  // unset: the engine's default (see config())
  bool enable_chunked_prefill = true;
  int64_t max_model_len = 0;
  int64_t block_size = 256;
  std::string kv_cache_dtype = "auto";
  std::optional<int64_t> kv_cache_memory_bytes;
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = true;
  std::optional<double> kv_offloading_size;
  std::string kv_offloading_dir;
  int64_t max_logprobs = 20;
  int64_t seed = 0;
  SpeculativeArgs speculative;  // --speculative-config, as `flint serve` reads it

  void add_to(FlagParser& parser);
  // Checks --speculative-config against the checkpoint directory (call after parsing).
  void resolve_speculative(const std::string& model_dir);
  // `checkpoint_bytes`: the weights' size, subtracted from the memory budget.
  engine::EngineConfig config(const dsv4::Config& model, int64_t checkpoint_bytes) const;
};

struct SamplingFlags {
  SamplingParams params;
  void add_to(FlagParser& parser);
};

// --kv-cache-dtype: auto (fp8 for DeepSeek-V4), fp8 (fp8_e4m3, fp8_ds_mla), bf16
// (bfloat16), float32 (flint's: no rounding). UsageError otherwise.
kernels::KvDtype parse_kv_cache_dtype(const std::string& text);
// $XDG_CACHE_HOME/flint/kv, else $HOME/.cache/flint/kv.
std::string default_kv_offloading_dir();

}  // namespace flint::cli
