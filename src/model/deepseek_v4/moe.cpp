#include "model/deepseek_v4/moe.h"

#include <cmath>
#include <vector>

#include "base/check.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/softmax.h"
#include "kernels/topk.h"

namespace flint::dsv4 {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold

// w2(swiglu(w1 x, w3 x) * row_weight) for rows of x; row_weight may be null (shared expert).
void expert_forward(const ExpertWeights& e, const Config& c, const float* x, int64_t n,
                    const float* row_weight, float* y, QuantSimulation sim) {
  const int64_t inter = e.w1.out_features();
  std::vector<float> gate(static_cast<size_t>(n * inter)), up(gate.size());
  e.w1.forward(x, n, gate.data(), sim);
  e.w3.forward(x, n, up.data(), sim);
  kernels::swiglu(gate.data(), up.data(), n * inter, static_cast<float>(c.swiglu_limit),
                  gate.data());
  if (row_weight != nullptr) {  // the official code weights the hidden state before w2
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < inter; ++i) gate[static_cast<size_t>(r * inter + i)] *= row_weight[r];
    }
  }
  e.w2.forward(gate.data(), n, y, sim);
}

}  // namespace

void route_token(const MoEWeights& w, const Config& c, const float* logits, int32_t token,
                 int32_t* experts, float* weights) {
  const int64_t E = c.n_routed_experts, k = c.num_experts_per_tok;
  std::vector<float> scores(logits, logits + E);
  switch (c.scoring_func) {
    case ScoringFunc::kSqrtSoftplus:
      for (auto& s : scores) s = std::sqrt(softplus(s));
      break;
    case ScoringFunc::kSigmoid:
      for (auto& s : scores) s = 1.0f / (1.0f + std::exp(-s));
      break;
    case ScoringFunc::kSoftmax:
      kernels::softmax(scores.data(), E);
      break;
  }
  if (w.tid2eid != nullptr) {
    for (int64_t i = 0; i < k; ++i) experts[i] = static_cast<int32_t>(w.tid2eid[token * k + i]);
  } else {
    std::vector<float> biased = scores;
    for (int64_t i = 0; i < E && !w.bias.empty(); ++i)
      biased[static_cast<size_t>(i)] += w.bias[static_cast<size_t>(i)];
    std::vector<int32_t> top;
    kernels::topk(biased.data(), E, k, top);
    for (int64_t i = 0; i < k; ++i) experts[i] = top[static_cast<size_t>(i)];
  }
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = scores[static_cast<size_t>(experts[i])];
    sum += weights[i];
  }
  // As the official Gate: non-softmax scores are renormalised over the chosen experts.
  for (int64_t i = 0; i < k; ++i) {
    if (c.scoring_func != ScoringFunc::kSoftmax) weights[i] /= sum;
    weights[i] *= static_cast<float>(c.routed_scaling_factor);
  }
}

void moe_forward(const MoEWeights& w, const Config& c, const float* x, const int32_t* tokens,
                 int64_t n, float* out, QuantSimulation sim) {
  const int64_t H = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  std::vector<float> logits(static_cast<size_t>(n * E));
  kernels::matmul(w.gate, x, n, logits.data());
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  for (int64_t t = 0; t < n; ++t) {
    if (w.tid2eid != nullptr && (tokens[t] < 0 || tokens[t] >= c.vocab_size)) {
      FLINT_CHECK(false, "token id {} outside the vocabulary reached hash routing", tokens[t]);
    }
    route_token(w, c, logits.data() + t * E, tokens[t], chosen.data() + t * k,
                weights.data() + t * k);
  }

  // Tokens grouped by expert; experts run in index order and add into `acc` in that order
  // (then the shared expert), as the official implementation accumulates.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      int32_t e = chosen[static_cast<size_t>(t * k + i)];
      FLINT_CHECK(e >= 0 && e < E, "expert id {} out of range", e);
      by_expert[static_cast<size_t>(e)].push_back({t, weights[static_cast<size_t>(t * k + i)]});
    }
  }
  std::vector<float> acc(static_cast<size_t>(n * H), 0.0f);
  std::vector<float> xs, ys, rw;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = by_expert[static_cast<size_t>(e)];
    if (rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(rows.size());
    xs.resize(static_cast<size_t>(m * H));
    ys.resize(static_cast<size_t>(m * H));
    rw.resize(static_cast<size_t>(m));
    for (int64_t r = 0; r < m; ++r) {
      std::copy(x + rows[static_cast<size_t>(r)].first * H,
                x + (rows[static_cast<size_t>(r)].first + 1) * H, xs.begin() + r * H);
      rw[static_cast<size_t>(r)] = rows[static_cast<size_t>(r)].second;
    }
    expert_forward(w.experts[static_cast<size_t>(e)], c, xs.data(), m, rw.data(), ys.data(), sim);
    for (int64_t r = 0; r < m; ++r) {
      float* dst = acc.data() + rows[static_cast<size_t>(r)].first * H;
      const float* src = ys.data() + r * H;
      for (int64_t d = 0; d < H; ++d) dst[d] += src[d];
    }
  }
  std::vector<float> shared(static_cast<size_t>(n * H));
  expert_forward(w.shared, c, x, n, nullptr, shared.data(), sim);
  for (int64_t i = 0; i < n * H; ++i)
    out[i] = acc[static_cast<size_t>(i)] + shared[static_cast<size_t>(i)];
}

}  // namespace flint::dsv4
