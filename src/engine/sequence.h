// One sample of a request as the engine tracks it: its tokens, how many of them are in
// the KV cache, and its sampler. The scheduler reads and moves these; the core runs them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "base/rng.h"
#include "engine/sampler.h"
#include "engine/speculative/draft_state.h"
#include "engine/speculative/proposer.h"
#include "kv/kv_cache.h"

namespace flint::engine {

struct RequestState;

struct Sequence {
  RequestState* request = nullptr;
  int32_t sample = 0;
  std::vector<int32_t> tokens;  // prompt, then the generated tokens
  int64_t prompt_len = 0;
  int64_t num_computed = 0;  // tokens whose KV is in the cache
  std::string cache_salt;
  std::optional<kv::KvCache::SeqId> kv;
  std::unique_ptr<Sampler> sampler;
  int64_t admitted = -1;   // order of (last) admission; -1 while waiting
  int64_t cached_prompt = -1;  // prompt tokens restored at first admission; -1 before
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> stop_token;
  std::vector<SampleResult> logprobs;  // per generated token, when asked for
  int64_t emitted = 0;     // generated tokens already sent in events
  int64_t max_tokens = 0;  // generated tokens at most

  // Speculative decoding: the drafts the next step verifies, the draft's own state, and
  // the generator that draws probabilistic drafts (its own, so the target's stays seeded).
  Draft draft;
  std::unique_ptr<DraftState> draft_state;
  Rng draft_rng{0};

  int64_t num_generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  int64_t uncomputed() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace flint::engine
