// Pieces shared by the OpenAI-style endpoints (chat completions, completions): request options
// that are not sampling, and the JSON of usage and logprobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/api_context.h"
#include "server/generation.h"
#include "server/json_fields.h"

namespace flint::server {

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats (vLLM)
};
StreamOptions parse_stream_options(const Json& body);

// Request fields that go into the engine request rather than the sampler: cache_salt, and
// flint_debug_replay (token ids that replace the model's output; refused unless the server
// runs with --enable-debug-replay). Call after the prompt and sampling are set.
void apply_request_extras(const ApiContext& ctx, const Json& body, engine::EngineRequest& request);

// The answer to a whole (not streamed) request the server aborted while the client waited:
// a shutdown past its grace period. 503, so that clients retry elsewhere.
void respond_aborted(Responder& responder);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}}.
Json usage_json(const engine::Usage& usage);

// The text of a token for logprobs: its bytes (possibly part of a UTF-8 character; the JSON
// writer replaces what is not valid UTF-8).
std::string token_text(const ApiContext& ctx, int32_t id);

// Chat logprobs entries {"token", "logprob", "bytes", "top_logprobs": [...]} of `results`.
Json chat_logprobs_content(const ApiContext& ctx, const std::vector<SampleResult>& results);

}  // namespace flint::server
