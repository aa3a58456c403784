// The sampler against scalar definitions written out here: softmax over the kept set,
// vLLM's penalties, min_tokens masks, logit bias, raw logprobs, seeded reproducibility.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "base/error.h"

namespace flint {
namespace {

SamplingParams params(double t, double top_p = 1.0, int64_t top_k = 0, double min_p = 0.0,
                      std::optional<uint64_t> seed = 0) {
  SamplingParams p;
  p.temperature = t;
  p.top_p = top_p;
  p.top_k = top_k;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

Sampler make(const SamplingParams& p, std::vector<int32_t> prompt = {},
             std::vector<int64_t> eos = {}) {
  validate(p, {1000, 20});
  return Sampler(p, prompt, eos, 1);
}

std::vector<float> dist(const Sampler& s, std::vector<float> logits) {
  return s.distribution(logits);
}

TEST(Sampler, GreedyTakesTheArgmaxLowestIdOnTies) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  Sampler s = make(params(0.0));
  auto copy = logits;
  EXPECT_EQ(s.sample(copy).token, 1);
  EXPECT_EQ(dist(s, logits), (std::vector<float>{0, 1, 0, 0}));
}

TEST(Sampler, DistributionMatchesDefinition) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f, 2.5f, -4.0f};
  auto softmax = [&](double t, std::vector<int> keep) {
    std::vector<double> p(logits.size(), 0.0);
    double z = 0;
    for (int i : keep) z += std::exp(logits[static_cast<size_t>(i)] / t);
    for (int i : keep) p[static_cast<size_t>(i)] = std::exp(logits[static_cast<size_t>(i)] / t) / z;
    return p;
  };
  auto check = [&](SamplingParams p, std::vector<int> keep) {
    auto got = dist(make(p), logits);
    auto want = softmax(p.temperature, keep);
    for (size_t i = 0; i < logits.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  };
  check(params(1.0), {0, 1, 2, 3, 4, 5});
  check(params(0.5), {0, 1, 2, 3, 4, 5});
  check(params(1.0, 1.0, 3), {1, 4, 2});
  // probabilities at T=1: 3.0 -> 0.463, 2.5 -> 0.281, 2.0 -> 0.170, 1.0 -> 0.063 ...
  check(params(1.0, 0.4), {1});
  check(params(1.0, 0.6), {1, 4});
  check(params(1.0, 0.8), {1, 4, 2});
  check(params(1.0, 1.0, 0, 0.3), {1, 4, 2});  // e^(2-3) = 0.37 >= 0.3 > e^(1-3)
}

TEST(Sampler, PenaltiesAndBiasFollowVllm) {
  // Expected logits by hand: repetition divides positive and multiplies negative logits of
  // prompt and output tokens; presence and frequency subtract on output tokens only.
  std::vector<float> logits = {1.0f, -1.0f, 2.0f, 0.5f, 0.0f};
  SamplingParams p = params(1.0);
  p.repetition_penalty = 2.0;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  p.logit_bias = {{4, 3.0f}};
  Sampler s = make(p, /*prompt=*/{0, 1});
  s.accept(2);
  s.accept(2);
  s.accept(3);
  std::vector<float> want = {1.0f / 2, -1.0f * 2, 2.0f / 2 - (0.25f * 2 + 0.5f),
                             0.5f / 2 - (0.25f + 0.5f), 3.0f};
  double z = 0;
  for (float v : want) z += std::exp(v);
  auto got = dist(s, logits);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], std::exp(want[i]) / z, 1e-6) << i;
}

TEST(Sampler, MinTokensMasksEosAndStopIdsUntilReached) {
  std::vector<float> logits = {0.0f, 5.0f, 4.0f, 1.0f};  // 1 = EOS, 2 = a stop id
  SamplingParams p = params(0.0);
  p.min_tokens = 2;
  p.stop_token_ids = {2};
  Sampler s = make(p, {}, {1});
  auto x = logits;
  EXPECT_EQ(s.sample(x).token, 3);
  s.accept(3);
  x = logits;
  EXPECT_EQ(s.sample(x).token, 3);
  s.accept(3);
  x = logits;
  EXPECT_EQ(s.sample(x).token, 1);  // two generated: EOS allowed again
}

TEST(Sampler, RawLogprobsAndTopN) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  SamplingParams p = params(0.0);
  p.logprobs = 3;
  p.presence_penalty = 2.0;  // processing must not change the reported logprobs
  Sampler s = make(p);
  s.accept(1);
  auto x = logits;
  SampleResult r = s.sample(x);
  double z = 0;
  for (float v : logits) z += std::exp(v);
  EXPECT_EQ(r.token, 3);  // 1 was penalised
  EXPECT_NEAR(r.logprob, 3.0 - std::log(z), 1e-6);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].token, 1);  // ties by id
  EXPECT_EQ(r.top[1].token, 3);
  EXPECT_EQ(r.top[2].token, 2);
  EXPECT_NEAR(r.top[2].logprob, 2.0 - std::log(z), 1e-6);
}

TEST(Sampler, SameSeedSameTokensAndFrequenciesFollowTheDistribution) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 0.5f};
  SamplingParams p = params(1.0, 1.0, 0, 0.0, 42);
  Sampler a = make(p), b = make(p);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto x = logits, y = logits;
    int32_t t = a.sample(x).token;
    EXPECT_EQ(t, b.sample(y).token);
    counts[t]++;
  }
  auto prob = dist(make(p), logits);
  for (int i = 0; i < 4; ++i) {
    // 5 standard deviations of a binomial count: fails by chance with probability < 1e-6.
    double sd = std::sqrt(n * prob[static_cast<size_t>(i)] * (1 - prob[static_cast<size_t>(i)]));
    EXPECT_NEAR(counts[i], n * prob[static_cast<size_t>(i)], 5 * sd) << i;
  }
}

// argmax (8 lanes) and top-k (a one-pass heap) against their definitions, on vocabularies of
// odd sizes with many ties and -inf entries.
TEST(Sampler, FastSelectionsEqualTheirDefinitions) {
  Rng rng(7);
  for (size_t n : {1u, 7u, 8u, 9u, 1000u, 5003u}) {
    std::vector<float> x(n);
    for (float& v : x) {
      const uint64_t r = rng.below(20);
      v = r == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(r % 7) * 0.5f;
    }
    // Definition: sort by (logit descending, id ascending).
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return x[static_cast<size_t>(a)] > x[static_cast<size_t>(b)];
    });
    EXPECT_EQ(argmax(x), order[0]) << n;
    for (int64_t k : {1, 3, 50}) {
      if (static_cast<size_t>(k) >= n) continue;
      SamplingParams p = params(0.7, 1.0, k);
      validate(p, {static_cast<int64_t>(n), 20});
      auto scratch = x;
      auto got = Sampler(p, {}, {}, 1).distribution(scratch);
      const float top = x[static_cast<size_t>(order[0])];
      double z = 0;
      for (int64_t i = 0; i < k; ++i) z += std::exp((x[static_cast<size_t>(order[i])] - top) / 0.7);
      std::vector<float> want(n, 0.0f);
      for (int64_t i = 0; i < k; ++i) {
        const size_t id = static_cast<size_t>(order[i]);
        want[id] = static_cast<float>(std::exp((x[id] - top) / 0.7) / z);
      }
      for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << n << " " << k << " " << i;
    }
    SamplingParams p = params(0.0);
    p.logprobs = std::min<int64_t>(5, static_cast<int64_t>(n));
    validate(p, {static_cast<int64_t>(n), 20});
    auto y = x;
    SampleResult r = Sampler(p, {}, {}, 1).sample(y);
    ASSERT_EQ(r.top.size(), static_cast<size_t>(*p.logprobs));
    for (size_t i = 0; i < r.top.size(); ++i) EXPECT_EQ(r.top[i].token, order[i]) << n << " " << i;
  }
}

TEST(Sampler, RejectsBadParametersNamingTheField) {
  auto message = [](SamplingParams p) {
    try {
      validate(p, {1000, 20});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto expect = [&](SamplingParams p, const char* field) {
    EXPECT_NE(message(p).find(field), std::string::npos) << field << ": " << message(p);
  };
  expect(params(-1.0), "temperature");
  expect(params(std::nan("")), "temperature");
  expect(params(1.0, 0.0), "top_p");
  expect(params(1.0, 1.5), "top_p");
  expect(params(1.0, 1.0, -5), "top_k");
  expect(params(1.0, 1.0, 0, 2.0), "min_p");
  SamplingParams p = params(1.0);
  p.presence_penalty = 3;
  expect(p, "presence_penalty");
  p = params(1.0);
  p.logit_bias = {{1000, 1.0f}};
  expect(p, "logit_bias");
  p = params(1.0);
  p.logprobs = 21;
  expect(p, "logprobs");
  p = params(1.0);
  p.n = 0;
  expect(p, "n must");
  p = params(1.0);
  p.max_tokens = 2;
  p.min_tokens = 3;
  expect(p, "min_tokens");
  p = params(1.0);
  p.stop_token_ids = {-1};
  expect(p, "stop_token_ids");
  EXPECT_EQ(message(params(0.7, 0.9, 40, 0.05)), "");
}

}  // namespace
}  // namespace flint
