// Token sampling with vLLM's semantics, one Sampler per sequence.
//
// Order (as vLLM): logit_bias, the min_tokens mask (EOS and stop_token_ids), repetition,
// presence and frequency penalties; then greedy argmax at temperature 0 (lowest id on ties),
// else softmax(logits / T) restricted by top-k, top-p and min-p, drawn with the sequence's
// own generator (seeded by `seed`, so a seeded request is reproducible whatever else runs in
// the batch). Logprobs are vLLM v1's default "raw" ones: log_softmax of the model's logits
// before any processing. Cost per token: one pass over the vocabulary (argmax; or a top-k
// selection, then the softmax over k; without top-k, the softmax over the vocabulary plus a
// sort of it when top-p or min-p cut it), and with logprobs one more pass for the
// log-sum-exp and the top N.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/rng.h"

namespace flint {

// Tokens the output must continue with, whatever the model prefers (tool_choice "required"
// after the reasoning, the server's debug replay): once `after` has been generated (from the
// first token when unset), the next outputs are `tokens`. Their logprobs are still the model's.
struct ForcedTokens {
  std::optional<int32_t> after;
  std::vector<int32_t> tokens;
  bool then_stop = false;  // the sample ends (finish reason stop) after the last forced token
};

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;        // (0, 1]
  int64_t top_k = 0;         // 0 or -1: no limit
  double min_p = 0.0;        // [0, 1]
  double presence_penalty = 0.0;    // [-2, 2], on generated tokens
  double frequency_penalty = 0.0;   // [-2, 2], on generated tokens
  double repetition_penalty = 1.0;  // > 0, on prompt and generated tokens
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits, [-100, 100]
  int64_t min_tokens = 0;  // EOS and stop_token_ids are masked until this many are generated
  std::optional<uint64_t> seed;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings: applied on text (text/stop_strings.h)
  bool include_stop_str_in_output = false;
  std::optional<int64_t> max_tokens;  // unset: up to the context limit
  bool ignore_eos = false;
  std::optional<int64_t> logprobs;  // 0: the sampled token's; N: also the N most likely
  int64_t n = 1;                    // samples of the request
  bool skip_special_tokens = true;  // for the client's detokenizer
  std::optional<ForcedTokens> forced;
};

struct SamplingLimits {
  int64_t vocab_size = 0;
  int64_t max_logprobs = 20;  // -1: no limit
};

// Throws flint::Error naming the field (as the OpenAI API spells it).
void validate(const SamplingParams& params, const SamplingLimits& limits);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// A token and its logit, or its probability once normalised.
struct Candidate {
  int32_t id = 0;
  float value = 0;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0;               // raw log-probability of `token`
  std::vector<TokenLogprob> top;   // the `logprobs` most likely, descending, ties by id
};

class Sampler {
 public:
  // `prompt` feeds the repetition penalty; `eos_ids` are masked under min_tokens.
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt,
          std::span<const int64_t> eos_ids, uint64_t fallback_seed);

  // Samples from `logits` (used as scratch: changed in place).
  SampleResult sample(std::span<float> logits);
  // Records a generated token (penalties, min_tokens, forced tokens).
  void accept(int32_t token);
  int64_t num_output() const { return num_output_; }
  // The forced tokens with then_stop have all been generated: the sample is done.
  bool forced_stop() const;

  // The probabilities sample() draws from, by token id (zero outside the kept set); for
  // tests and lossless speculative verification. `logits` is scratch.
  std::vector<float> distribution(std::span<float> logits) const;
  // The token greedy sampling would take (after logit_bias, penalties, min_tokens): for
  // greedy drafts. `logits` is scratch.
  int32_t greedy(std::span<float> logits) const;

  // Speculative verification of `draft` against the target's `logits` (scratch), lossless:
  // greedy sampling (and forced tokens) accept the draft iff it is the token sample() would
  // take; otherwise the draft is accepted with probability min(1, p(draft) / q(draft)) and
  // a rejection draws from max(p - q, 0) normalised, where p is the distribution sample()
  // draws from and q the draft's (null: a greedy draft, q one-hot). The returned token
  // (the draft, or the replacement) then follows p exactly. Does not accept() it.
  SampleResult verify(std::span<float> logits, int32_t draft, const std::vector<float>* q,
                      bool* accepted);

 private:
  void process(std::span<float> logits) const;
  // Raw logprobs (the logits before processing) into `res`, when asked for; returns the
  // log-sum-exp (0 without logprobs). Keeps the raw logits in raw_.
  float raw_logprobs(std::span<const float> logits, SampleResult& res);
  bool forcing() const;
  // The kept set with its probabilities, most likely first (ties by id); `logits` is scratch.
  std::vector<Candidate> kept(std::span<float> logits) const;

  SamplingParams params_;
  std::vector<int32_t> masked_;  // EOS and stop ids, while below min_tokens
  std::unordered_map<int32_t, int32_t> output_counts_;
  std::unordered_map<int32_t, bool> seen_;  // prompt and output tokens (repetition penalty)
  Rng rng_;
  int64_t num_output_ = 0;
  // Next forced token's index into params_.forced->tokens; -1 before `after` was generated.
  int64_t forced_next_ = -1;
  std::vector<float> raw_;  // scratch: the unprocessed logits, for logprobs
};

int32_t argmax(std::span<const float> logits);

}  // namespace flint
