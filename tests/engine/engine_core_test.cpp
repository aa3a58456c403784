// The engine core through its API: what a request gets back, what it may not ask for,
// aborts wherever the request is, prefix caching seen through the statistics, parallel
// samples, and greedy outputs that do not depend on the rest of the batch.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine_test_util.h"

namespace flint::engine {
namespace {

using testutil::greedy;
using testutil::request;
using testutil::random_tokens;
using testutil::run_to_end;
using testutil::small_config;
using testutil::tiny_model;

std::string error_of(EngineCore& core, EngineRequest r) {
  try {
    core.add(std::move(r));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EngineCore, GreedyEqualsTheModelAlone) {
  EngineCore core(tiny_model(), small_config());
  auto prompt = random_tokens(150, 31);
  core.add(request("a", prompt, greedy(12)));
  auto out = run_to_end(core);
  EXPECT_EQ(out["a"].tokens[0], testutil::greedy_alone(prompt, 12));
  EXPECT_EQ(out["a"].finish[0], FinishReason::kLength);
  EXPECT_TRUE(out["a"].finished);
  EXPECT_EQ(out["a"].usage.prompt_tokens, 150);
  EXPECT_EQ(out["a"].usage.completion_tokens, 12);
  EXPECT_EQ(out["a"].events, 12);  // one event per token
}

TEST(EngineCore, GreedyDoesNotDependOnTheBatch) {
  auto prompt = random_tokens(90, 32);
  auto alone = testutil::greedy_alone(prompt, 10);
  EngineCore core(tiny_model(), small_config());
  Rng rng(5);
  // A crowd of random requests around it: other lengths, sampled, started before and after.
  for (int i = 0; i < 6; ++i) {
    SamplingParams p;
    p.temperature = 0.8;
    p.top_p = 0.9;
    p.max_tokens = 1 + static_cast<int64_t>(rng.below(15));
    core.add(request("crowd" + std::to_string(i),
                     random_tokens(1 + static_cast<int64_t>(rng.below(300)), 100 + i), p));
  }
  core.step();
  core.add(request("mine", prompt, greedy(10)));
  for (int i = 6; i < 10; ++i) {
    core.add(request("crowd" + std::to_string(i), random_tokens(40 + i, 100 + i), greedy(8)));
  }
  auto out = run_to_end(core);
  EXPECT_EQ(out["mine"].tokens[0], alone);
}

TEST(EngineCore, SeededRequestsAreReproducibleInAnyBatch) {
  auto prompt = random_tokens(40, 33);
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 1234;
  p.max_tokens = 15;
  p.ignore_eos = true;
  std::vector<int32_t> first;
  {
    EngineCore core(tiny_model(), small_config());
    core.add(request("s", prompt, p));
    first = run_to_end(core)["s"].tokens[0];
  }
  EngineCore core(tiny_model(), small_config());
  core.add(request("other", random_tokens(70, 34), greedy(20)));
  core.step();
  core.add(request("s", prompt, p));
  auto out = run_to_end(core);
  EXPECT_EQ(out["s"].tokens[0], first);
  EXPECT_EQ(first.size(), 15u);
}

TEST(EngineCore, RefusesBadRequestsNamingTheField) {
  EngineConfig c = small_config();
  c.max_model_len = 200;
  EngineCore core(tiny_model(), c);
  auto msg = error_of(core, request("x", random_tokens(150, 1), greedy(100)));
  EXPECT_NE(msg.find("150"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("200"), std::string::npos) << msg;
  EXPECT_NE(error_of(core, request("x", {}, greedy(1))).find("prompt"), std::string::npos);
  EXPECT_NE(error_of(core, request("x", {5, 129280}, greedy(1))).find("129280"),
            std::string::npos);
  SamplingParams bad = greedy(1);
  bad.temperature = -1;
  EXPECT_NE(error_of(core, request("x", {5}, bad)).find("temperature"), std::string::npos);
  bad = greedy(1);
  bad.top_p = 1.5;
  EXPECT_NE(error_of(core, request("x", {5}, bad)).find("top_p"), std::string::npos);
  bad = greedy(1);
  bad.logprobs = 50;
  EXPECT_NE(error_of(core, request("x", {5}, bad)).find("logprobs"), std::string::npos);
  EXPECT_FALSE(core.has_work());  // nothing was taken
  EXPECT_EQ(core.stats().kv_pages_used, 0);
  core.add(request("dup", {5, 6}, greedy(3)));
  EXPECT_NE(error_of(core, request("dup", {5}, greedy(1))).find("dup"), std::string::npos);
}

TEST(EngineCore, AbortFreesTheKvWhereverTheRequestIs) {
  EngineConfig c = small_config();
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 2;
  EngineCore core(tiny_model(), c);
  core.add(request("decoding", random_tokens(10, 40), greedy(100)));
  core.add(request("prefilling", random_tokens(600, 41), greedy(100)));
  core.add(request("waiting", random_tokens(20, 42), greedy(100)));
  for (int i = 0; i < 3; ++i) core.step();
  auto s = core.stats();
  EXPECT_EQ(s.running, 2);
  EXPECT_EQ(s.waiting, 1);
  for (const char* id : {"waiting", "prefilling", "decoding"}) {
    auto ev = core.abort(id);
    ASSERT_TRUE(ev.has_value()) << id;
    EXPECT_EQ(ev->finish, FinishReason::kAbort);
    EXPECT_TRUE(ev->request_finished);
  }
  EXPECT_FALSE(core.abort("decoding").has_value());
  EXPECT_FALSE(core.has_work());
  EXPECT_EQ(core.stats().kv_pages_used, 0);
}

TEST(EngineCore, SecondIdenticalRequestComputesOnlyTheUncachedTail) {
  EngineCore core(tiny_model(), small_config());
  auto prompt = random_tokens(300, 43);
  core.add(request("cold", prompt, greedy(5)));
  auto cold = run_to_end(core);
  const auto before = core.stats();
  core.add(request("warm", prompt, greedy(5)));
  auto warm = run_to_end(core);
  const auto after = core.stats();
  EXPECT_EQ(warm["warm"].tokens[0], cold["cold"].tokens[0]);
  EXPECT_EQ(warm["warm"].usage.cached_prompt_tokens, 256);
  EXPECT_EQ(cold["cold"].usage.cached_prompt_tokens, 0);
  // 44 uncached prompt tokens, then 4 decode steps of one token.
  EXPECT_EQ(after.step_tokens - before.step_tokens, 44 + 4);
  EXPECT_EQ(after.prefix_hits - before.prefix_hits, 256);
  EXPECT_EQ(after.prefix_queries - before.prefix_queries, 300);
}

TEST(EngineCore, ParallelSamplesShareThePrompt) {
  EngineCore core(tiny_model(), small_config());
  auto prompt = random_tokens(200, 44);
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = 7;
  p.n = 4;
  p.max_tokens = 6;
  p.ignore_eos = true;
  core.add(request("n4", prompt, p));
  std::map<std::string, testutil::Collected> first;
  testutil::collect(first, core.step());  // the prompt, computed once; four samples drawn
  auto s = core.stats();
  EXPECT_EQ(s.running, 4);
  EXPECT_EQ(s.step_tokens, 200);
  const auto& l = core.kv_layout();
  // One shared full block; the partial block copied per sample.
  EXPECT_EQ(s.kv_pages_used, l.pages_per_block() + 4 * l.pages_per_block());
  auto out = run_to_end(core, first);
  ASSERT_EQ(out["n4"].tokens.size(), 4u);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(out["n4"].tokens[k].size(), 6u) << k;
  EXPECT_NE(out["n4"].tokens[0], out["n4"].tokens[1]);  // different seeds per sample
  EXPECT_EQ(out["n4"].usage.completion_tokens, 24);
  EXPECT_EQ(core.stats().kv_pages_used, 0);
}

TEST(EngineCore, StopTokenIdsAndLogprobs) {
  EngineCore core(tiny_model(), small_config());
  auto prompt = random_tokens(30, 45);
  auto alone = testutil::greedy_alone(prompt, 8);
  SamplingParams p = greedy(8);
  p.stop_token_ids = {alone[3]};
  p.logprobs = 3;
  core.add(request("s", prompt, p));
  auto out = run_to_end(core);
  // The first occurrence of that token ends it (it may occur before index 3).
  auto first = std::find(alone.begin(), alone.end(), alone[3]) - alone.begin();
  EXPECT_EQ(out["s"].tokens[0], std::vector<int32_t>(alone.begin(), alone.begin() + first + 1));
  EXPECT_EQ(out["s"].finish[0], FinishReason::kStop);
  ASSERT_EQ(out["s"].logprobs.size(), out["s"].tokens[0].size());
  for (const auto& lp : out["s"].logprobs) {
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].token, lp.token);  // greedy: the sampled token is the most likely
    EXPECT_LE(lp.logprob, 0.0f);
  }
}

}  // namespace
}  // namespace flint::engine

namespace flint::engine {
namespace {

// Forced tokens (tool_choice "required" after the reasoning, the server's debug replay): the
// output holds them whatever the model prefers, the model's own greedy choice resumes after
// them, and then_stop ends the sample there; logprobs stay the model's.
TEST(EngineCore, ForcedTokensFollowTheirTriggerAndCanEndTheSample) {
  auto prompt = random_tokens(40, 41);
  auto alone = testutil::greedy_alone(prompt, 6);
  EngineCore core(tiny_model(), small_config());

  SamplingParams replay = greedy(50);
  replay.forced = ForcedTokens{std::nullopt, {7, 8, 9}, true};
  replay.logprobs = 0;
  core.add(request("replay", prompt, replay));

  // Triggered by the model's own second token: forced tokens follow it.
  SamplingParams after = greedy(6);
  after.forced = ForcedTokens{alone[1], {11, 12}, false};
  core.add(request("after", prompt, after));

  auto out = run_to_end(core);
  EXPECT_EQ(out["replay"].tokens[0], (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(out["replay"].finish[0], FinishReason::kStop);
  EXPECT_EQ(out["after"].tokens[0][0], alone[0]);
  EXPECT_EQ(out["after"].tokens[0][1], alone[1]);
  EXPECT_EQ(out["after"].tokens[0][2], 11);
  EXPECT_EQ(out["after"].tokens[0][3], 12);
  EXPECT_EQ(out["after"].tokens[0].size(), 6u);

  SamplingParams bad = greedy(3);
  bad.forced = ForcedTokens{std::nullopt, {-1}, true};
  EXPECT_NE(error_of(core, request("bad", prompt, bad)).find("forced tokens"), std::string::npos);
}

}  // namespace
}  // namespace flint::engine
