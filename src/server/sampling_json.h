// The sampling fields of /v1/chat/completions and /v1/completions — OpenAI's and the extra ones
// vLLM accepts — read into SamplingParams over the server's defaults. Range checks are the
// engine's (engine/sampler.h validate()), reported as 400s naming the field.
#pragma once

#include "engine/sampler.h"
#include "server/json_fields.h"

namespace flint::server {

enum class SamplingDialect {
  kChat,         // logprobs: bool with top_logprobs; max_completion_tokens over max_tokens
  kCompletions,  // logprobs: an integer
};

// Reads temperature, top_p, top_k, min_p, presence/frequency/repetition_penalty, seed, n,
// best_of (must equal n), stop, stop_token_ids, include_stop_str_in_output, ignore_eos,
// min_tokens, skip_special_tokens, logit_bias, max_tokens / max_completion_tokens, logprobs
// and top_logprobs. Throws ApiError for a field of the wrong type or shape.
SamplingParams parse_sampling(const Json& body, const SamplingParams& defaults,
                              SamplingDialect dialect);

}  // namespace flint::server
