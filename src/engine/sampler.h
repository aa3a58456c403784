// Token sampling from logits: greedy at temperature 0, else softmax(logits / T) restricted
// by top-k, top-p (nucleus) and min-p, drawn with a per-request seeded generator so that a
// request with a seed is reproducible whatever else runs in the batch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/rng.h"

namespace flint {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy (argmax, lowest id on ties)
  double top_p = 1.0;        // (0, 1]
  int64_t top_k = 0;         // 0 or -1: no limit
  double min_p = 0.0;        // [0, 1]: drop tokens below min_p * max probability
  uint64_t seed = 0;
};

// Throws flint::Error naming the field for out-of-range parameters.
void validate(const SamplingParams& params);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  int32_t sample(std::span<const float> logits);

  // The probabilities the sampler draws from (after temperature, top-k, top-p, min-p),
  // indexed by token id; zero outside the kept set. Used by tests and by lossless
  // speculative verification.
  std::vector<float> distribution(std::span<const float> logits) const;

 private:
  SamplingParams params_;
  Rng rng_;
};

int32_t argmax(std::span<const float> logits);

}  // namespace flint
