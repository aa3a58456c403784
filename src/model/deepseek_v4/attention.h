// DeepSeek-V4 attention for a batch of sequence chunks: low-rank q with per-head RMS
// norm, one shared K=V head, interleaved RoPE on the last rope dims, a sliding window of
// recent tokens plus compressed entries (all of them on ratio-128 layers, the indexer's
// top-k on ratio-4 layers), attention sinks, inverse RoPE on the output, and the grouped
// low-rank output projection.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/kv_store.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

// The rows of one sequence inside a batch: x rows [row, row + n) are its tokens at
// positions pos0 .. pos0 + n - 1.
struct Segment {
  LayerKv* state = nullptr;
  int64_t row = 0;
  int64_t n = 0;
  int64_t pos0 = 0;
};

struct LayerRope {
  std::vector<float> inv_freq;  // qk_rope_head_dim / 2 frequencies of this layer
};

// The layer's RoPE: base rope_theta without YaRN on ratio-0 layers; compress_rope_theta
// with YaRN on compressed layers.
LayerRope layer_rope(const Config& c, int64_t compress_ratio);

// x: [N, H] normalised inputs of all segments; out: [N, H]. Appends each segment's rows to
// its store (rounded to the store's format before use, so stored and fresh rows agree).
void attention_forward(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                       std::span<const Segment> segments, const float* x, int64_t n_rows,
                       float* out, QuantSimulation sim);

}  // namespace flint::dsv4
