#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "base/error.h"

namespace flint {
namespace {

TEST(Sampler, GreedyTakesTheArgmaxLowestIdOnTies) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  Sampler s({0.0, 1.0, 0, 0.0, 7});
  EXPECT_EQ(s.sample(logits), 1);
  auto p = s.distribution(logits);
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

// The distribution against its definition: softmax(logits / T) over the kept set, where top-k
// keeps the k largest, min-p drops tokens below min_p * max, top-p keeps the smallest prefix
// (by probability) whose mass reaches top_p.
TEST(Sampler, DistributionMatchesDefinition) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f, 2.5f, -4.0f};
  auto softmax = [&](double t, std::vector<int> keep) {
    std::vector<double> p(logits.size(), 0.0);
    double z = 0;
    for (int i : keep) z += std::exp(logits[i] / t);
    for (int i : keep) p[i] = std::exp(logits[i] / t) / z;
    return p;
  };
  auto check = [&](SamplingParams params, std::vector<int> keep) {
    auto got = Sampler(params).distribution(logits);
    auto want = softmax(params.temperature, keep);
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  };
  check({1.0, 1.0, 0, 0.0, 0}, {0, 1, 2, 3, 4, 5});
  check({0.5, 1.0, 0, 0.0, 0}, {0, 1, 2, 3, 4, 5});
  check({1.0, 1.0, 3, 0.0, 0}, {1, 4, 2});
  // probabilities at T=1: 3.0 -> 0.463, 2.5 -> 0.281, 2.0 -> 0.170, 1.0 -> 0.063 ...
  check({1.0, 0.4, 0, 0.0, 0}, {1});        // 0.4 <= 0.463
  check({1.0, 0.6, 0, 0.0, 0}, {1, 4});     // 0.463 < 0.6 <= 0.744
  check({1.0, 0.8, 0, 0.0, 0}, {1, 4, 2});  // 0.744 < 0.8 <= 0.914
  check({1.0, 1.0, 0, 0.3, 0}, {1, 4, 2});  // e^(2-3) = 0.37 >= 0.3 > e^(1-3)
}

TEST(Sampler, SameSeedSameTokensAndFrequenciesFollowTheDistribution) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 0.5f};
  SamplingParams params{1.0, 1.0, 0, 0.0, 42};
  Sampler a(params), b(params);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    int32_t x = a.sample(logits);
    EXPECT_EQ(x, b.sample(logits));
    counts[x]++;
  }
  auto p = Sampler(params).distribution(logits);
  for (int i = 0; i < 4; ++i) {
    // 5 standard deviations of a binomial count: fails by chance with probability < 1e-6.
    double sd = std::sqrt(n * p[i] * (1 - p[i]));
    EXPECT_NEAR(counts[i], n * p[i], 5 * sd) << i;
  }
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(Sampler({-1.0, 1.0, 0, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 0.0, 0, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 1.5, 0, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 1.0, -5, 0.0, 0}), Error);
  EXPECT_THROW(Sampler({1.0, 1.0, 0, 2.0, 0}), Error);
  EXPECT_THROW(Sampler({std::nan(""), 1.0, 0, 0.0, 0}), Error);
}

}  // namespace
}  // namespace flint
