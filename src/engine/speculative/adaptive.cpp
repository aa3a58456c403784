#include "engine/speculative/adaptive.h"

#include <algorithm>
#include <cmath>

namespace flint::engine {

void StepCost::observe(int64_t tokens, double seconds) {
  auto [it, fresh] = avg_.emplace(tokens, seconds);
  if (!fresh) it->second = 0.8 * it->second + 0.2 * seconds;
}

double StepCost::estimate(int64_t tokens) const {
  if (avg_.empty()) return 0;
  auto hi = avg_.lower_bound(tokens);
  if (hi != avg_.end() && hi->first == tokens) return hi->second;
  if (hi == avg_.begin())
    return hi->second * static_cast<double>(tokens) / static_cast<double>(hi->first);
  auto lo = std::prev(hi);
  if (hi == avg_.end()) {  // beyond what was seen: extend the last slope (never below flat)
    if (lo == avg_.begin()) return lo->second;
    auto before = std::prev(lo);
    const double slope = std::max(
        0.0, (lo->second - before->second) / static_cast<double>(lo->first - before->first));
    return lo->second + slope * static_cast<double>(tokens - lo->first);
  }
  const double f =
      static_cast<double>(tokens - lo->first) / static_cast<double>(hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

AdaptiveVerifier::AdaptiveVerifier(int64_t max_drafts)
    : max_drafts_(max_drafts),
      predicted_(static_cast<size_t>(max_drafts), 0.0),
      accepted_(static_cast<size_t>(max_drafts), 0.0) {}

double AdaptiveVerifier::calibrated(int64_t j, double c) const {
  // A prior of one accepted in one predicted keeps the raw confidence until data exists.
  const auto k = static_cast<size_t>(j);
  return std::clamp(c * (accepted_[k] + 1.0) / (predicted_[k] + 1.0), 0.0, 1.0);
}

int64_t AdaptiveVerifier::choose(std::span<Draft* const> drafts, int64_t plain_tokens) {
  struct Slot {
    double survival;
    size_t seq;
    int64_t j;
  };
  std::vector<Slot> slots;
  int64_t decoding = 0;
  for (size_t r = 0; r < drafts.size(); ++r) {
    ++decoding;
    double s = 1.0;
    const auto& conf = drafts[r]->confidence;
    for (int64_t j = 0; j < static_cast<int64_t>(conf.size()) && j < max_drafts_; ++j) {
      s *= calibrated(j, conf[static_cast<size_t>(j)]);
      slots.push_back({s, r, j});
    }
  }
  // Survival falls along a sequence's drafts, so the best k slots are prefixes.
  std::stable_sort(slots.begin(), slots.end(),
                   [](const Slot& a, const Slot& b) { return a.survival > b.survival; });
  const double base = cost_.estimate(plain_tokens);
  int64_t best_k = 0;
  double expected = static_cast<double>(decoding), best_rate = 0;
  if (base > 0) best_rate = expected / base;
  for (size_t k = 1; k <= slots.size() && base > 0; ++k) {
    expected += slots[k - 1].survival;
    const double rate = expected / cost_.estimate(plain_tokens + static_cast<int64_t>(k));
    if (rate > best_rate) {
      best_rate = rate;
      best_k = static_cast<int64_t>(k);
    }
  }
  if (base <= 0) best_k = static_cast<int64_t>(slots.size());  // nothing measured yet
  std::vector<int64_t> keep(drafts.size(), 0);
  for (int64_t k = 0; k < best_k; ++k) {
    const Slot& s = slots[static_cast<size_t>(k)];
    keep[s.seq] = std::max(keep[s.seq], s.j + 1);
  }
  int64_t kept = 0;
  for (size_t r = 0; r < drafts.size(); ++r) {
    Draft& d = *drafts[r];
    const auto n = static_cast<size_t>(keep[r]);
    if (d.tokens.size() > n) d.tokens.resize(n);
    if (d.confidence.size() > n) d.confidence.resize(n);
    if (d.q.size() > n) d.q.resize(n);
    kept += keep[r];
  }
  // Would plain decoding, with no drafting at all, have been faster? Then pause drafting.
  if (base > 0 && decoding > 0 && draft_cost_known_) {
    const double plain_rate = static_cast<double>(decoding) / base;
    double spec_expected = static_cast<double>(decoding);
    for (int64_t k = 0; k < best_k; ++k) spec_expected += slots[static_cast<size_t>(k)].survival;
    const double spec_rate =
        spec_expected / (cost_.estimate(plain_tokens + best_k) +
                         draft_seconds_per_seq_ * static_cast<double>(decoding));
    if (spec_rate < plain_rate) {
      // A probe (the step that drafts after a pause) costs the drafting of every decoding
      // sequence: pause long enough that probes take at most kProbeShare of the time.
      const double probe = draft_seconds_per_seq_ * static_cast<double>(decoding);
      const auto budget = static_cast<int64_t>(std::ceil(probe / (kProbeShare * base)));
      pause_left_ = std::max(backoff_, budget);
      backoff_ = std::min<int64_t>(backoff_ * 2, 64);
    } else {
      backoff_ = 1;
    }
  }
  return kept;
}

void AdaptiveVerifier::observe(const std::vector<float>& confidence, int64_t verified,
                               int64_t accepted) {
  for (int64_t j = 0; j < verified && j < max_drafts_; ++j) {
    // Position j was reached only if every earlier draft was accepted.
    if (j > accepted) break;
    predicted_[static_cast<size_t>(j)] += confidence[static_cast<size_t>(j)];
    accepted_[static_cast<size_t>(j)] += j < accepted ? 1.0 : 0.0;
  }
}

void AdaptiveVerifier::observe_drafting(int64_t sequences, double seconds) {
  if (sequences <= 0) return;
  const double per = seconds / static_cast<double>(sequences);
  draft_seconds_per_seq_ = draft_cost_known_ ? 0.8 * draft_seconds_per_seq_ + 0.2 * per : per;
  draft_cost_known_ = true;
}

void AdaptiveVerifier::tick() {
  if (pause_left_ > 0) --pause_left_;
}

}  // namespace flint::engine
