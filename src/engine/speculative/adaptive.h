// Adaptive verification: each step, how many of its drafts each sequence verifies, chosen
// so that the step's expected output per second is highest, down to none (and drafting
// paused) when plain decoding is faster. Speculation then never makes serving slower.
//
// Expected output: every decoding sequence emits one token plus its accepted drafts; draft j
// of a sequence survives with s_j = prod_{i<=j} c_i, c_i its calibrated confidence (the
// DSpark confidence head, or the draft's probability of its token, times the measured
// acceptance / predicted ratio at position i, so an uncalibrated head, e.g. random weights,
// is corrected by what verification actually accepts). Cost: the measured forward time at
// the step's token count (profiled at start-up, then an average of real steps), plus the
// measured drafting time. As in vLLM's, the choice uses only the drafts' confidences, never
// the tokens being verified, so verification stays lossless.
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/speculative/proposer.h"

namespace flint::engine {

// Forward seconds by tokens per step: averages of observed steps, linear in between.
class StepCost {
 public:
  void observe(int64_t tokens, double seconds);
  double estimate(int64_t tokens) const;  // 0 when nothing is known
  bool empty() const { return avg_.empty(); }

 private:
  std::map<int64_t, double> avg_;
};

class AdaptiveVerifier {
 public:
  static constexpr double kProbeShare = 0.01;

  explicit AdaptiveVerifier(int64_t max_drafts);

  StepCost& cost() { return cost_; }
  // Trims drafts (each Draft's tokens, confidence and q) to the counts that maximise
  // expected tokens per second for a step of `plain_tokens` besides the drafts.
  // Returns the draft tokens kept.
  int64_t choose(std::span<Draft* const> drafts, int64_t plain_tokens);
  // After verification: `verified` drafts of `d` were checked, `accepted` accepted.
  void observe(const std::vector<float>& confidence, int64_t verified, int64_t accepted);
  void observe_drafting(int64_t sequences, double seconds);
  // False while drafting is paused because it did not pay: retried after 1, 2, 4 .. 64
  // steps, or after enough steps that the retries cost at most kProbeShare of the time, so
  // a change in acceptance or load is noticed.
  bool drafting() const { return pause_left_ == 0; }
  void tick();  // once per step

  // Calibrated confidence of draft position j (0-based) with raw confidence c.
  double calibrated(int64_t j, double c) const;

 private:
  int64_t max_drafts_;
  StepCost cost_;
  std::vector<double> predicted_, accepted_;  // per position, over verified drafts
  double draft_seconds_per_seq_ = 0;
  bool draft_cost_known_ = false;
  int64_t pause_left_ = 0, backoff_ = 1;
};

}  // namespace flint::engine
