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

// Floating-point operations (2 per multiply-add) of the weight products one prompt token
// passes through: the same matrices, k of E experts of mean size per MoE layer, and not the
// head (only a request's last prompt token needs logits). Attention scores are left out
// (window plus top-k compressed entries: small next to the products at these lengths).
double prefill_matmul_flops_per_token(const TargetWeights& w, const Config& c);

}  // namespace flint::dsv4
