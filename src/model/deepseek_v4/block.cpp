#include "model/deepseek_v4/block.h"

#include "base/page_cache.h"
#include "kernels/norm.h"
#include "model/deepseek_v4/hyper_connections.h"
#include "model/deepseek_v4/moe.h"

namespace flint::dsv4 {

void block_forward(const BlockWeights& w, const Config& c, const LayerRope& rope,
                   std::span<const Segment> segments, const int32_t* tokens, float* streams,
                   int64_t n, QuantSimulation sim, Comm* comm) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  const float eps = static_cast<float>(c.rms_norm_eps);
  // Buffers of a large step come back from the page cache in every layer (page_cache.h).
  PageCachedVector<float> x(static_cast<size_t>(n * H)), y(x.size());
  PageCachedVector<float> residual(streams, streams + n * hc * H);
  HcMix mix;

  hc_pre(w.hc_attn, c, residual.data(), n, x.data(), mix);
  kernels::rms_norm(x.data(), w.attn_norm.data(), n, H, eps, x.data());
  attention_forward(w.attn, c, rope, segments, x.data(), n, y.data(), sim, comm);
  hc_post(c, y.data(), residual.data(), mix, n, streams);

  residual.assign(streams, streams + n * hc * H);
  hc_pre(w.hc_ffn, c, residual.data(), n, x.data(), mix);
  kernels::rms_norm(x.data(), w.ffn_norm.data(), n, H, eps, x.data());
  moe_forward(w.ffn, c, x.data(), tokens, n, y.data(), sim, comm);
  hc_post(c, y.data(), residual.data(), mix, n, streams);
}

}  // namespace flint::dsv4
