#include "model/deepseek_v4/moe.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "base/check.h"
#include "base/page_cache.h"
#include "base/thread_pool.h"
#include "kernels/activation.h"
#include "kernels/matmul.h"
#include "kernels/softmax.h"
#include "kernels/topk.h"

namespace flint::dsv4 {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold

// The rows of x one expert sees (the shared expert: all of them), with their gate outputs.
struct ExpertRun {
  const ExpertWeights* weights = nullptr;
  const float* x = nullptr;           // [m, H]
  const float* row_weight = nullptr;  // [m], null for the shared expert
  int64_t m = 0;
  float* y = nullptr;  // [m, H]
  size_t hidden = 0;   // offset of its [m, inter] gate and up rows in the scratch buffers
};

// y = w2(swiglu(w1 x, w3 x) * row_weight) for every run: all the w1 and w3 products in one
// parallel region, then all the w2 products in another (one product per expert and
// projection, however many tokens chose the expert).
void experts_forward(std::span<ExpertRun> runs, const Config& c, QuantSimulation sim) {
  size_t total = 0;
  for (ExpertRun& r : runs) {
    r.hidden = total;
    total += static_cast<size_t>(r.m * r.weights->w1.out_features());
  }
  thread_local std::vector<float> gate, up;
  gate.resize(total);
  up.resize(total);
  std::vector<LinearCall> calls;
  calls.reserve(2 * runs.size());
  for (const ExpertRun& r : runs) {
    calls.push_back({&r.weights->w1, r.x, r.m, gate.data() + r.hidden});
    calls.push_back({&r.weights->w3, r.x, r.m, up.data() + r.hidden});
  }
  forward_many(calls, sim);
  // The activations, run by run in parallel (elementwise: the split changes no bits). The
  // buffers are this thread's: the pool's threads get their addresses.
  float* const gate_rows = gate.data();
  const float* const up_rows = up.data();
  // A decode step's 6 or so runs of a few hundred values split too: exp makes a run a few
  // microseconds, and the pool's threads spin between a forward pass's regions.
  parallel_for(runs.size(), 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const ExpertRun& r = runs[i];
      const int64_t inter = r.weights->w1.out_features();
      float* g = gate_rows + r.hidden;
      kernels::swiglu(g, up_rows + r.hidden, r.m * inter, static_cast<float>(c.swiglu_limit), g);
      if (r.row_weight != nullptr) {  // the official code weights the hidden state before w2
        for (int64_t t = 0; t < r.m; ++t) {
          for (int64_t j = 0; j < inter; ++j) g[t * inter + j] *= r.row_weight[t];
        }
      }
    }
  });
  calls.clear();
  for (const ExpertRun& r : runs)
    calls.push_back({&r.weights->w2, gate.data() + r.hidden, r.m, r.y});
  forward_many(calls, sim);
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
                 int64_t n, float* out, QuantSimulation sim, Comm* comm) {
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

  // Tokens grouped by expert (experts run in index order).
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      int32_t e = chosen[static_cast<size_t>(t * k + i)];
      FLINT_CHECK(e >= 0 && e < E, "expert id {} out of range", e);
      if (w.experts[static_cast<size_t>(e)].w1.weight.empty()) continue;  // another rank's
      by_expert[static_cast<size_t>(e)].push_back({t, weights[static_cast<size_t>(t * k + i)]});
    }
  }
  // Each expert's rows gathered (token order), the shared expert over all rows. Row `row`
  // of xs / ys is token src_token[row]; token t's rows, by expert index, are
  // rows_of[t * k .. t * k + count[t]).
  std::vector<int64_t> start(static_cast<size_t>(E + 1), 0);
  for (int64_t e = 0; e < E; ++e)
    start[static_cast<size_t>(e + 1)] =
        start[static_cast<size_t>(e)] +
        static_cast<int64_t>(by_expert[static_cast<size_t>(e)].size());
  const int64_t routed = start[static_cast<size_t>(E)];
  PageCachedVector<float> xs(static_cast<size_t>(routed * H)), ys(xs.size());
  std::vector<float> rw(static_cast<size_t>(routed));
  std::vector<int64_t> src_token(static_cast<size_t>(routed)), rows_of(static_cast<size_t>(n * k));
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  PageCachedVector<float> shared(static_cast<size_t>(n * H));
  std::vector<ExpertRun> runs;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = by_expert[static_cast<size_t>(e)];
    if (rows.empty()) continue;
    const int64_t s0 = start[static_cast<size_t>(e)];
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto [t, weight] = rows[r];
      const int64_t row = s0 + static_cast<int64_t>(r);
      src_token[static_cast<size_t>(row)] = t;
      rw[static_cast<size_t>(row)] = weight;
      rows_of[static_cast<size_t>(t * k + count[static_cast<size_t>(t)]++)] = row;
    }
    runs.push_back({&w.experts[static_cast<size_t>(e)], xs.data() + s0 * H, rw.data() + s0,
                    static_cast<int64_t>(rows.size()), ys.data() + s0 * H});
  }
  parallel_for(static_cast<size_t>(routed), grain_for(H), [&](size_t b, size_t e) {
    for (size_t row = b; row < e; ++row) {
      const float* src = x + src_token[row] * H;
      std::copy(src, src + H, xs.begin() + static_cast<int64_t>(row) * H);
    }
  });
  runs.push_back({&w.shared, x, nullptr, n, shared.data()});
  experts_forward(runs, c, sim);

  // Token t's output: zero, plus its experts' rows in expert index order, plus the shared
  // expert, as the official implementation accumulates (each token on one thread).
  parallel_for(static_cast<size_t>(n), grain_for(H * (k + 1)), [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      float* dst = out + static_cast<int64_t>(t) * H;
      std::fill(dst, dst + H, 0.0f);
      for (int64_t j = 0; j < count[t]; ++j) {
        const float* src = ys.data() + rows_of[t * static_cast<size_t>(k) + size_t(j)] * H;
        for (int64_t d = 0; d < H; ++d) dst[d] += src[d];
      }
      const float* sh = shared.data() + static_cast<int64_t>(t) * H;
      for (int64_t d = 0; d < H; ++d) dst[d] += sh[d];
    }
  });
  if (comm_size(comm) > 1) comm->all_reduce_sum(out, static_cast<size_t>(n * H), "MoE output");
}

}  // namespace flint::dsv4
