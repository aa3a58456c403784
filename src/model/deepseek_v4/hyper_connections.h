// Hyper-connections: DeepSeek-V4 keeps hc_mult residual streams per token instead of one.
// Around each sub-layer, hc_pre mixes the streams into the sub-layer's input and derives
// the post weights and a doubly stochastic (Sinkhorn) stream-mixing matrix; hc_post writes
// the sub-layer's output back into the streams. hc_head reduces the streams at the end.
//
// Streams are stored [n, hc, H] row-major (token-major).
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace flint::dsv4 {

struct HcMix {
  std::vector<float> post;  // [n, hc]
  std::vector<float> comb;  // [n, hc, hc]: comb[j][k] moves stream j into stream k
};

// streams [n, hc, H] -> x [n, H] = sum_k pre[k] * stream_k; fills mix.
void hc_pre(const HyperConnWeights& w, const Config& c, const float* streams, int64_t n, float* x,
            HcMix& mix);

// out[k] = post[k] * y + sum_j comb[j][k] * residual[j], per token. out must not alias
// residual (every output stream reads every residual stream).
void hc_post(const Config& c, const float* y, const float* residual, const HcMix& mix, int64_t n,
             float* out);

// streams [n, hc, H] -> x [n, H] = sum_k (sigmoid(mix_k * scale + base_k) + eps) * stream_k.
void hc_head(const HcHeadWeights& w, const Config& c, const float* streams, int64_t n, float* x);

}  // namespace flint::dsv4
