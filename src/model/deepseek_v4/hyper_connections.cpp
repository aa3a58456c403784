#include "model/deepseek_v4/hyper_connections.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/sinkhorn.h"

namespace flint::dsv4 {

namespace {

// config.cpp refuses a larger hc_mult: per-token weights fit on the stack.
constexpr int64_t kMaxHc = 64;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// body(t) for every token t < n, tokens split over the thread pool (grain_for: about 16K
// values per chunk; a token's work is independent, so no bits change).
template <class Body>
void for_tokens(int64_t n, int64_t per_token, const Body& body) {
  parallel_for(static_cast<size_t>(n), grain_for(per_token), [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) body(static_cast<int64_t>(t));
  });
}

// mixes[n, rows] = (fn . flat(streams)) / rms(flat(streams)): the projection is scaled by
// the inverse RMS of all hc * H values of the token (norm_eps as in the reference).
std::vector<float> mixes_of(const WeightMatrix& fn, const Config& c, const float* streams,
                            int64_t n) {
  const int64_t width = c.hc_mult * c.hidden_size;
  std::vector<float> mixes(static_cast<size_t>(n * fn.rows));
  kernels::matmul(fn, streams, n, mixes.data());
  for_tokens(n, width, [&](int64_t t) {
    float inv =
        kernels::rms_inverse(streams + t * width, width, static_cast<float>(c.rms_norm_eps));
    for (int64_t r = 0; r < fn.rows; ++r) mixes[static_cast<size_t>(t * fn.rows + r)] *= inv;
  });
  return mixes;
}

void weighted_sum(const float* streams, const float* weights, int64_t hc, int64_t H, float* x) {
  for (int64_t d = 0; d < H; ++d) x[d] = 0.0f;
  for (int64_t k = 0; k < hc; ++k) {
    const float* s = streams + k * H;
    for (int64_t d = 0; d < H; ++d) x[d] += weights[k] * s[d];
  }
}

}  // namespace

void hc_pre(const HyperConnWeights& w, const Config& c, const float* streams, int64_t n, float* x,
            HcMix& mix) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  const float eps = static_cast<float>(c.hc_eps);
  std::vector<float> mixes = mixes_of(w.fn, c, streams, n);
  const int64_t m = w.fn.rows;  // (2 + hc) * hc
  FLINT_CHECK(hc <= kMaxHc, "hc_mult {} above the configured limit", hc);
  mix.post.resize(static_cast<size_t>(n * hc));
  mix.comb.resize(static_cast<size_t>(n * hc * hc));
  for_tokens(n, hc * H, [&](int64_t t) {
    float pre[kMaxHc];
    const float* mt = mixes.data() + t * m;
    for (int64_t k = 0; k < hc; ++k) {
      pre[k] = sigmoid(mt[k] * w.scale[0] + w.base[static_cast<size_t>(k)]) + eps;
      mix.post[static_cast<size_t>(t * hc + k)] =
          2.0f * sigmoid(mt[hc + k] * w.scale[1] + w.base[static_cast<size_t>(hc + k)]);
    }
    float* comb = mix.comb.data() + t * hc * hc;
    for (int64_t i = 0; i < hc * hc; ++i)
      comb[i] = mt[2 * hc + i] * w.scale[2] + w.base[static_cast<size_t>(2 * hc + i)];
    kernels::sinkhorn(comb, hc, c.hc_sinkhorn_iters, eps);
    weighted_sum(streams + t * hc * H, pre, hc, H, x + t * H);
  });
}

void hc_post(const Config& c, const float* y, const float* residual, const HcMix& mix, int64_t n,
             float* out) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  // Items are (token, output stream): a decode step's single token splits by stream (each
  // is (hc + 1) * H multiply-adds, several microseconds), prefill by tokens as elsewhere.
  const auto items = static_cast<size_t>(n * hc);
  const size_t grain =
      std::min(grain_for((hc + 1) * H), (items + thread_pool().size() - 1) / thread_pool().size());
  parallel_for(items, grain, [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      const int64_t t = static_cast<int64_t>(item) / hc, k = static_cast<int64_t>(item) % hc;
      const float* yt = y + t * H;
      const float* res = residual + t * hc * H;
      const float* comb = mix.comb.data() + t * hc * hc;
      float* o = out + (t * hc + k) * H;
      const float post = mix.post[static_cast<size_t>(t * hc + k)];
      for (int64_t d = 0; d < H; ++d) o[d] = post * yt[d];
      for (int64_t j = 0; j < hc; ++j) {
        const float cjk = comb[j * hc + k];
        const float* rj = res + j * H;
        for (int64_t d = 0; d < H; ++d) o[d] += cjk * rj[d];
      }
    }
  });
}

void hc_head(const HcHeadWeights& w, const Config& c, const float* streams, int64_t n, float* x) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  FLINT_CHECK(hc <= kMaxHc, "hc_mult {} above the configured limit", hc);
  std::vector<float> mixes = mixes_of(w.fn, c, streams, n);
  for_tokens(n, hc * H, [&](int64_t t) {
    float pre[kMaxHc];
    for (int64_t k = 0; k < hc; ++k) {
      pre[k] = sigmoid(mixes[static_cast<size_t>(t * hc + k)] * w.scale[0] +
                       w.base[static_cast<size_t>(k)]) +
               static_cast<float>(c.hc_eps);
    }
    weighted_sum(streams + t * hc * H, pre, hc, H, x + t * H);
  });
}

}  // namespace flint::dsv4
