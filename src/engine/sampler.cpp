#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace flint {

void validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) {
    throw Error("temperature must be a finite number >= 0, got {}", p.temperature);
  }
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) throw Error("top_p must be in (0, 1], got {}", p.top_p);
  if (p.top_k < -1) throw Error("top_k must be -1, 0 (no limit) or positive, got {}", p.top_k);
  if (!(p.min_p >= 0.0 && p.min_p <= 1.0)) throw Error("min_p must be in [0, 1], got {}", p.min_p);
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  validate(params_);
}

std::vector<float> Sampler::distribution(std::span<const float> logits) const {
  const size_t n = logits.size();
  std::vector<float> probs(n, 0.0f);
  if (n == 0) return probs;
  if (params_.temperature == 0.0) {
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return probs;
  }
  // Candidates sorted by logit (descending, ties by id) so that top-k and top-p cut a prefix.
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  size_t keep = n;
  if (params_.top_k > 0) keep = std::min<size_t>(n, static_cast<size_t>(params_.top_k));
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  if (keep < n && params_.top_p >= 1.0 && params_.min_p <= 0.0) {
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  order.resize(keep);
  const double inv_t = 1.0 / params_.temperature;
  const double top = logits[static_cast<size_t>(order[0])];
  std::vector<double> w(order.size());
  double sum = 0.0;
  for (size_t i = 0; i < order.size(); ++i) {
    w[i] = std::exp((logits[static_cast<size_t>(order[i])] - top) * inv_t);
    sum += w[i];
  }
  // min-p: relative to the most likely token; top-p: smallest prefix reaching top_p.
  size_t cut = order.size();
  if (params_.min_p > 0.0) {
    while (cut > 1 && w[cut - 1] < params_.min_p * w[0]) --cut;
  }
  if (params_.top_p < 1.0) {
    double acc = 0.0;
    for (size_t i = 0; i < cut; ++i) {
      acc += w[i] / sum;
      if (acc >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double kept = 0.0;
  for (size_t i = 0; i < cut; ++i) kept += w[i];
  for (size_t i = 0; i < cut; ++i)
    probs[static_cast<size_t>(order[i])] = static_cast<float>(w[i] / kept);
  return probs;
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (params_.temperature == 0.0) return argmax(logits);
  std::vector<float> probs = distribution(logits);
  double u = rng_.uniform();
  double acc = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    acc += probs[i];
    last = static_cast<int32_t>(i);
    if (u < acc) return last;
  }
  return last;  // rounding left u above the total: the last kept token
}

}  // namespace flint
