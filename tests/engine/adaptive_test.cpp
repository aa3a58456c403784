// AdaptiveVerifier and StepCost against hand-computed values: the cost table, the choice of
// draft slots that maximises expected tokens per second, calibration, and the pause.
#include <gtest/gtest.h>

#include "engine/speculative/adaptive.h"

namespace flint::engine {
namespace {

TEST(StepCost, InterpolatesAndExtendsTheLastSlope) {
  StepCost c;
  EXPECT_EQ(c.estimate(3), 0.0);
  c.observe(1, 1.0);
  c.observe(4, 2.5);
  EXPECT_DOUBLE_EQ(c.estimate(1), 1.0);
  EXPECT_DOUBLE_EQ(c.estimate(2), 1.5);
  EXPECT_DOUBLE_EQ(c.estimate(8), 4.5);  // 2.5 + 0.5 per token
  c.observe(4, 3.5);                     // running average: 0.8 old + 0.2 new
  EXPECT_DOUBLE_EQ(c.estimate(4), 2.7);
}

Draft draft_with(std::vector<float> confidence) {
  Draft d;
  for (size_t i = 0; i < confidence.size(); ++i) d.tokens.push_back(static_cast<int32_t>(i));
  d.confidence = std::move(confidence);
  return d;
}

TEST(AdaptiveVerifier, KeepsTheDraftsThatRaiseTokensPerSecond) {
  AdaptiveVerifier v(4);
  // Cost 1.0 for 1 token, +0.25 per further token (the step's plain tokens are the decoding
  // sequences' last tokens, one each).
  for (int64_t t = 1; t <= 10; ++t) v.cost().observe(t, 1.0 + 0.25 * static_cast<double>(t - 1));
  // One sequence, confidences 0.9 0.9 0.5 0.5: survivals 0.9 0.81 0.405 0.2025.
  // Rates (1 + sum) / cost(1 + k): k=0 1.0, k=1 1.9/1.25 = 1.52, k=2 2.71/1.5 = 1.807,
  // k=3 3.115/1.75 = 1.780: the best is k = 2.
  Draft d = draft_with({0.9f, 0.9f, 0.5f, 0.5f});
  Draft* ds[] = {&d};
  EXPECT_EQ(v.choose(ds, 1), 2);
  EXPECT_EQ(d.tokens.size(), 2u);
  EXPECT_EQ(d.confidence.size(), 2u);
  // Two sequences: their slots compete by survival across sequences (2 plain tokens).
  Draft a = draft_with({0.95f, 0.95f}), b = draft_with({0.3f, 0.3f});
  Draft* two[] = {&a, &b};
  // Slots by survival: a0 0.95, a1 0.9025, b0 0.3, b1 0.09. Rates: k=0 2/1.25 = 1.6,
  // k=1 2.95/1.5 = 1.967, k=2 3.8525/1.75 = 2.201, k=3 4.1525/2.0 = 2.076: a keeps 2, b 0.
  EXPECT_EQ(v.choose(two, 2), 2);
  EXPECT_EQ(a.tokens.size(), 2u);
  EXPECT_TRUE(b.tokens.empty());
}

TEST(AdaptiveVerifier, CalibratesConfidenceByMeasuredAcceptance) {
  AdaptiveVerifier v(2);
  EXPECT_DOUBLE_EQ(v.calibrated(0, 0.8), 0.8);  // prior: one accepted in one predicted
  // Ten drafts of confidence 0.8 at position 0, none accepted: predicted 8, accepted 0.
  for (int i = 0; i < 10; ++i) v.observe({0.8f, 0.8f}, 2, 0);
  EXPECT_NEAR(v.calibrated(0, 0.8), 0.8 * 1.0 / 9.0, 1e-6);
  EXPECT_DOUBLE_EQ(v.calibrated(1, 0.8), 0.8);  // position 1 was never reached
}

TEST(AdaptiveVerifier, PausesDraftingLongEnoughThatProbesCostOnePercent) {
  AdaptiveVerifier v(3);
  for (int64_t t = 1; t <= 8; ++t) v.cost().observe(t, static_cast<double>(t));  // linear
  v.observe_drafting(1, 0.5);  // drafting costs half a step per sequence
  Draft d = draft_with({0.1f, 0.1f, 0.1f});
  Draft* ds[] = {&d};
  EXPECT_EQ(v.choose(ds, 1), 0);  // no draft pays on a linear cost
  EXPECT_TRUE(d.tokens.empty());
  // Plain: 1 token / 1.0 s; drafting: 1 / 1.5 s. Pause ceil(0.5 / (0.01 x 1.0)) = 50 steps.
  EXPECT_FALSE(v.drafting());
  for (int i = 0; i < 49; ++i) v.tick();
  EXPECT_FALSE(v.drafting());
  v.tick();
  EXPECT_TRUE(v.drafting());
}

}  // namespace
}  // namespace flint::engine
