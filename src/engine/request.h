// What goes into the engine and what comes out of it: plain structs, no tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace flint::engine {

struct EngineRequest {
  std::string id;  // unique among live requests; events and abort() use it
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  std::string cache_salt;  // requests share cached prefixes only under the same salt
  // SpecMethod::kOracle only (a benchmarking aid): the prompt and the continuation a plain
  // greedy run produced, which the oracle drafts from.
  std::vector<int32_t> oracle_tokens;
};

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

// One verified draft (EngineConfig::record_drafts, for `flint generate --print-drafts`).
struct DraftRecord {
  int64_t context = 0;  // tokens the target had computed: the anchor's position
  int32_t anchor = 0;   // the token the draft continued
  std::vector<int32_t> tokens;
  std::vector<float> confidence;
  int64_t accepted = 0;  // leading drafts the target accepted
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // over all samples of the request
  int64_t cached_prompt_tokens = 0;  // prompt tokens restored from the prefix cache
  double queue_seconds = 0;  // from add() to the first step that computed the request
};

// One event of one sample of a request: the tokens produced since the last event and,
// on the last event, why it finished. Usage is filled on the request's final event (when
// every sample has finished).
struct RequestOutput {
  std::string request_id;
  int32_t sample = 0;  // 0 .. n-1
  std::vector<int32_t> tokens;
  std::vector<SampleResult> logprobs;  // per token, when the request asked for logprobs
  std::vector<DraftRecord> drafts;     // verified this step (with record_drafts only)
  FinishReason finish = FinishReason::kNone;
  std::optional<int32_t> stop_token;  // the EOS or stop_token_ids token that finished it
  bool request_finished = false;      // every sample of the request is done
  Usage usage;
  std::string error;  // for kError
};

}  // namespace flint::engine
