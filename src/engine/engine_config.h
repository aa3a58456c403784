// The engine's settings, with vLLM's meanings (the `flint serve` flags of the same names).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "kernels/kv_codec.h"
#include "model/linear.h"

namespace flint::engine {

struct EngineConfig {
  int64_t max_num_seqs = 256;           // running sequences at most
  int64_t max_num_batched_tokens = 8192;  // tokens per step at most
  bool enable_chunked_prefill = true;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  int64_t max_logprobs = 20;  // -1: no limit
  uint64_t seed = 0;          // for requests without a seed
  // Requests waiting to start at most (queued and not yet scheduled); 0: no bound. Beyond
  // it submit() throws QueueFullError (the server answers 429).
  int64_t max_waiting_requests = 0;

  // KV cache.
  int64_t block_size = 256;
  kernels::KvDtype kv_dtype = kernels::KvDtype::kFp8;
  int64_t kv_cache_bytes = 0;  // the pool's size; 0: kv_cache_pages decides
  int64_t kv_cache_pages = 0;  // for tests and tools
  bool enable_prefix_caching = true;
  std::optional<double> kv_offloading_gib;
  std::filesystem::path kv_offloading_dir;

  QuantSimulation quant_simulation = QuantSimulation::kOfficial;
};

}  // namespace flint::engine
