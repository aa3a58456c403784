// DeepSeek-V4 mixture of experts: sqrt(softplus) (or sigmoid/softmax) scores of the gate,
// top-k selection on score + bias (bias only chooses, it never weights), or a fixed
// token -> experts table on hash layers; weights = chosen scores normalised and times
// routed_scaling_factor; clamped SwiGLU experts plus one shared expert.
#pragma once

#include <cstdint>

#include "base/comm.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

// x: [n, H] (ffn_norm output), tokens: [n] ids (hash routing), out: [n, H].
// With `comm` (shard.h) each rank runs its experts (its part of each, or whole experts under
// expert parallelism: another rank's experts are empty and skipped) and its part of the
// shared expert; the output is summed over the ranks. Every rank routes every token, so a
// rank whose experts got no token still joins the sum.
void moe_forward(const MoEWeights& w, const Config& c, const float* x, const int32_t* tokens,
                 int64_t n, float* out, QuantSimulation sim, Comm* comm = nullptr);

// The routing of one token (exposed for tests): expert ids and weights.
void route_token(const MoEWeights& w, const Config& c, const float* gate_logits, int32_t token,
                 int32_t* experts, float* weights);

}  // namespace flint::dsv4
