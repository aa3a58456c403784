#include "engine/speculative/proposer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "engine/speculative/pending_window.h"

namespace flint::engine {

const char* spec_method_name(SpecMethod m) {
  switch (m) {
    case SpecMethod::kNone:
      return "none";
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kMtp:
      return "mtp";
    case SpecMethod::kDSpark:
      return "dspark";
    case SpecMethod::kOracle:
      return "oracle";
  }
  return "?";
}

std::unique_ptr<DraftState> PendingWindowState::clone() const {
  auto c = std::make_unique<PendingWindowState>();
  c->kv = std::make_unique<dsv4::SequenceState>(*kv);
  c->row_floats = row_floats;
  c->rows = rows;
  c->tokens = tokens;
  return c;
}

void PendingWindowState::drop(int64_t n) {
  n = std::min(n, pending());
  if (n <= 0) return;
  kv->advance(n);
  rows.erase(rows.begin(), rows.begin() + n * row_floats);
  if (!tokens.empty()) tokens.erase(tokens.begin(), tokens.begin() + n);
}

std::unique_ptr<Proposer> make_proposer(const dsv4::Model& model, const EngineConfig& config) {
  switch (config.speculative.method) {
    case SpecMethod::kNone:
      return nullptr;
    case SpecMethod::kNgram:
      return spec_internal::make_ngram(config);
    case SpecMethod::kMtp:
      return spec_internal::make_mtp(model, config);
    case SpecMethod::kDSpark:
      return spec_internal::make_dspark(model, config);
    case SpecMethod::kOracle:
      return spec_internal::make_oracle(model, config);
  }
  return nullptr;
}

int32_t pick_draft(std::span<float> logits, const ProposeItem& item, float confidence) {
  Draft& out = *item.out;
  if (item.probabilistic) {
    std::vector<float> q = item.sampler->distribution(logits);
    const double u = item.rng->uniform();
    double acc = 0.0;
    int32_t token = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      if (q[i] <= 0.0f) continue;
      acc += q[i];
      token = static_cast<int32_t>(i);
      if (u < acc) break;
    }
    out.tokens.push_back(token);
    out.confidence.push_back(confidence >= 0 ? confidence : q[static_cast<size_t>(token)]);
    out.q.push_back(std::move(q));
    return token;
  }
  // Greedy: the draft's probability of its argmax (softmax of the raw logits) is its
  // confidence unless the draft has a head for it.
  float p = confidence;
  if (p < 0) {
    const float m = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (float v : logits) sum += std::exp(static_cast<double>(v - m));
    p = static_cast<float>(1.0 / sum);
  }
  const int32_t token = item.sampler->greedy(logits);
  out.tokens.push_back(token);
  out.confidence.push_back(p);
  return token;
}

}  // namespace flint::engine
