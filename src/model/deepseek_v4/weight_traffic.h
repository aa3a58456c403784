// Bytes of weights a decode step reads: the figure that bounds decoding on a CPU, where a
// step streams every weight its tokens pass through once (flint bench divides it by the
// measured memory bandwidth to give the roofline).
#pragma once

#include <cstdint>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace flint::dsv4 {

// Expected bytes of weights (data plus scales) read by one decode step of `tokens`
// sequences: every attention, compressor, indexer, hyper-connection, gate and shared-expert
// matrix and the head once, one embedding row per token, and per MoE layer the routed
// experts the tokens select: E (1 - (1 - k/E)^tokens) distinct ones of E, each of the
// layer's mean expert size, for routing spread evenly (random weights, and what load
// balancing aims at). Drafts, the KV cache and activations are not counted.
double decode_weight_bytes(const TargetWeights& w, const Config& c, int64_t tokens);

}  // namespace flint::dsv4
