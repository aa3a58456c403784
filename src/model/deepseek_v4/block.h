// One DeepSeek-V4 decoder block over a batch: hc_pre, attn_norm, attention, hc_post,
// hc_pre, ffn_norm, MoE, hc_post. Shared by the target layers, the MTP layer and the
// DSpark stages.
#pragma once

#include <cstdint>
#include <span>

#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

// streams: [n, hc, H], updated in place. segments give each sequence's rows, positions and
// this layer's state. tokens: [n] ids (hash routing).
void block_forward(const BlockWeights& w, const Config& c, const LayerRope& rope,
                   std::span<const Segment> segments, const int32_t* tokens, float* streams,
                   int64_t n, QuantSimulation sim, Comm* comm = nullptr);

}  // namespace flint::dsv4
