// The engine's settings, with vLLM's meanings (the `flint serve` flags of the same names).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "kernels/kv_codec.h"
#include "model/linear.h"

namespace flint::engine {

// Speculative decoding (--speculative-config); engine/speculative/ implements it.
enum class SpecMethod {
  kNone,
  kNgram,   // prompt lookup, no weights
  kMtp,     // the checkpoint's MTP layer mtp.0, chained
  kDSpark,  // DeepSeek-V4-Flash-0731's DSpark stages, one block pass
  kOracle,  // debug: drafts the target's own greedy continuation (from a plain run),
            // each token kept with probability oracle_accept; for speed-up curves
};

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNone;
  int64_t num_tokens = 0;           // draft tokens per step at most
  bool probabilistic_drafts = false;  // sampled drafts (else argmax), for temperature > 0
  int64_t prompt_lookup_min = 0, prompt_lookup_max = 0;  // ngram
  // Choose per step how many drafts each sequence verifies from the measured cost of a
  // step and the expected acceptance, down to none (adaptive.h).
  bool adaptive = false;
  int64_t disable_by_batch_size = 0;  // no drafting while more sequences run; 0: no limit
  int64_t max_model_len = 0;          // no drafting for contexts longer; 0: no limit
  double oracle_accept = 1.0;         // kOracle: probability each oracle draft is right
  bool enabled() const { return method != SpecMethod::kNone && num_tokens > 0; }
};

const char* spec_method_name(SpecMethod m);

// --debug-fault RANK:ACTION:WHEN, for the failure tests: rank RANK fails (throws an error),
// stalls (sleeps forever) or dies (SIGKILL) at start-up (WHEN = "start-up") or before the
// forward call of step WHEN (0-based). Off by default.
struct DebugFault {
  enum class Action { kNone, kFail, kStall, kDie };
  int rank = -1;
  Action action = Action::kNone;
  int64_t step = -1;  // -1: at start-up

  // Throws flint::Error naming the part of `spec` that does not parse.
  static DebugFault parse(const std::string& spec);
  static DebugFault parse_optional(const std::string& spec) {
    return spec.empty() ? DebugFault{} : parse(spec);
  }
  // Acts if this is the chosen rank and moment.
  void trigger(int rank_now, int64_t step_now) const;
};

struct EngineConfig {
  int64_t max_num_seqs = 256;           // running sequences at most
  // Tokens per step at most. vLLM's default for its server on a CPU: prefill is compute-bound,
  // so larger steps gain little, and a step's activations grow with its tokens (about 0.23 MB
  // a token on the bench preset). The CLI raises it to --max-model-len without chunked prefill.
  int64_t max_num_batched_tokens = 2048;
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
  SpeculativeConfig speculative;
  bool record_drafts = false;  // events carry every verified draft (a debugging aid)
  DebugFault debug_fault;      // failure tests of tensor parallelism (tensor_parallel.h)
};

}  // namespace flint::engine
