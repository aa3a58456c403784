// Speculative decoding against its independent truths: a rolled-back state equals one fed
// only the kept tokens; greedy output with any draft method and length equals plain greedy
// output, in crowded batches, with chunked prefill, preemption and prefix-cache hits; a
// draft computed after a prefix-cache hit equals the cold one; and verification draws from
// exactly the target distribution (chi-square), where a biased verifier is caught.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "base/error.h"
#include "engine_test_util.h"

namespace flint::engine {
namespace {

using testutil::greedy;
using testutil::request;
using testutil::preset_model;
using testutil::random_tokens;
using testutil::run_to_end;
using testutil::small_config;

// --- the model's rollback -------------------------------------------------------------

TEST(SpecRollback, RolledBackStateEqualsOneFedOnlyTheKeptTokens) {
  const dsv4::Model& m = preset_model("tiny");
  const auto sim = QuantSimulation::kOfficial;
  // 121 + 7 crosses ratio-4 boundaries (124, 128) and the ratio-128 one (128).
  const auto prefix = random_tokens(121, 5), spec = random_tokens(7, 6), after = random_tokens(6, 7);
  for (int64_t keep = 0; keep <= 7; ++keep) {
    dsv4::SequenceState a(m.config(), kernels::KvDtype::kFp8, 8), b = a;
    dsv4::ForwardRequest pa{&a, prefix, false, nullptr}, pb{&b, prefix, false, nullptr};
    m.forward({&pa, 1}, sim);
    m.forward({&pb, 1}, sim);
    dsv4::KvUndo undo;
    dsv4::ForwardRequest sa{&a, spec, true, &undo};
    m.forward({&sa, 1}, sim);
    m.rollback(a, undo, keep, sim);
    ASSERT_EQ(a.length(), 121 + keep);
    if (keep > 0) {
      dsv4::ForwardRequest sb{&b, std::span<const int32_t>(spec).first(keep), false, nullptr};
      m.forward({&sb, 1}, sim);
    }
    dsv4::ForwardRequest ta{&a, after, true, nullptr}, tb{&b, after, true, nullptr};
    const std::vector<float> la = m.forward({&ta, 1}, sim), lb = m.forward({&tb, 1}, sim);
    ASSERT_EQ(la.size(), lb.size());
    float worst = 0;
    for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(la[i] - lb[i]));
    EXPECT_EQ(worst, 0.0f) << "keep " << keep;
  }
}

// --- lossless greedy through the engine ---------------------------------------------------

struct Job {
  std::string id;
  std::vector<int32_t> prompt;
  int64_t max_tokens;
};

// Prompts of several lengths, some repetitive (so that n-gram drafts hit), some sharing a
// prefix (prefix-cache hits once the first has run).
std::vector<Job> jobs() {
  const bool small = flint::testing::kSanitized;
  std::vector<Job> j;
  j.push_back({"rand", random_tokens(small ? 40 : 150, 11), 20});
  auto rep = random_tokens(12, 12);
  std::vector<int32_t> loop;
  for (int i = 0; i < (small ? 4 : 12); ++i) loop.insert(loop.end(), rep.begin(), rep.end());
  j.push_back({"loop", loop, 24});
  j.push_back({"short", random_tokens(5, 13), 16});
  if (!small) {
    auto shared = random_tokens(300, 14);
    j.push_back({"shared-a", shared, 16});
    shared.resize(290);
    auto tail = random_tokens(20, 15);
    shared.insert(shared.end(), tail.begin(), tail.end());
    j.push_back({"shared-b", shared, 16});
  }
  return j;
}

std::map<std::string, std::vector<int32_t>> run(const dsv4::Model& model, EngineConfig c,
                                               const std::vector<Job>& js,
                                               const std::map<std::string, std::vector<int32_t>>*
                                                   oracle = nullptr,
                                               EngineStats* stats = nullptr) {
  EngineCore core(model, c);
  for (const Job& j : js) {
    EngineRequest r = request(j.id, j.prompt, greedy(j.max_tokens));
    if (oracle) {
      r.oracle_tokens = j.prompt;
      const auto& cont = oracle->at(j.id);
      r.oracle_tokens.insert(r.oracle_tokens.end(), cont.begin(), cont.end());
    }
    core.add(std::move(r));
  }
  auto out = run_to_end(core);
  if (stats) *stats = core.stats();
  std::map<std::string, std::vector<int32_t>> tokens;
  for (auto& [id, c2] : out) tokens[id] = c2.tokens[0];
  return tokens;
}

void expect_lossless(const std::string& preset, SpecMethod method, int64_t max_k,
                     EngineConfig base = small_config()) {
  const dsv4::Model& model = preset_model(preset);
  const auto js = jobs();
  const auto plain = run(model, base, js);
  for (int64_t k = 1; k <= max_k; ++k) {
    // Sanitizer builds run the model 10 to 40 times slower: the shortest and longest drafts.
    if (flint::testing::kSanitized && k != 1 && k != max_k) continue;
    EngineConfig c = base;
    c.speculative.method = method;
    c.speculative.num_tokens = k;
    c.speculative.prompt_lookup_min = 1;  // random weights rarely repeat longer n-grams
    c.speculative.prompt_lookup_max = 4;
    c.speculative.oracle_accept = 0.7;
    EngineStats stats;
    const auto spec = run(model, c, js, method == SpecMethod::kOracle ? &plain : nullptr, &stats);
    for (const Job& j : js) EXPECT_EQ(spec.at(j.id), plain.at(j.id)) << j.id << ", k = " << k;
    // n-gram drafts need the output to repeat the context, which random weights hardly do
    // (NgramProposer's own test checks its proposals).
    if (method != SpecMethod::kNgram) {
      EXPECT_GT(stats.spec_drafts, 0) << "k = " << k;
    }
    // Random weights accept next to nothing; the oracle accepts 70%, so partly accepted
    // drafts of every length are verified and rolled back.
    if (method == SpecMethod::kOracle) {
      EXPECT_GT(stats.spec_accepted_tokens, 0) << "k = " << k;
    }
  }
}

TEST(SpecLossless, NgramGreedyEqualsPlain) { expect_lossless("tiny", SpecMethod::kNgram, 7); }
TEST(SpecLossless, MtpGreedyEqualsPlain) { expect_lossless("tiny", SpecMethod::kMtp, 7); }
TEST(SpecLossless, DSparkGreedyEqualsPlain) {
  expect_lossless("tiny-dspark", SpecMethod::kDSpark, 5);  // dspark_block_size
}
// The oracle accepts 70% of its drafts: verification and rollback of partly accepted drafts
// at every length.
TEST(SpecLossless, OracleGreedyEqualsPlain) { expect_lossless("tiny", SpecMethod::kOracle, 7); }

TEST(SpecLossless, UnderPreemptionAndAdaptiveVerification) {
  const dsv4::Model& model = preset_model("tiny-dspark");
  const kv::KvLayout l = kv::make_kv_layout(model.config(), 128, kernels::KvDtype::kFp8);
  EngineConfig c = small_config(l.pages_for_tokens(1024) + 2 * l.pages_for_tokens(300));
  c.max_num_batched_tokens = 160;  // chunked prefill too
  const auto js = jobs();
  const auto plain = run(model, c, js);
  for (SpecMethod m : {SpecMethod::kDSpark, SpecMethod::kOracle}) {
    EngineConfig s = c;
    s.speculative.method = m;
    s.speculative.num_tokens = 4;
    s.speculative.oracle_accept = 0.8;
    s.speculative.adaptive = true;
    EngineStats stats;
    const auto spec = run(model, s, js, m == SpecMethod::kOracle ? &plain : nullptr, &stats);
    for (const Job& j : js) EXPECT_EQ(spec.at(j.id), plain.at(j.id)) << j.id;
    if (!flint::testing::kSanitized) {
      EXPECT_GT(stats.preemptions, 0);
    }
  }
}

TEST(SpecDraft, NgramProposesWhatFollowedTheLongestEarlierMatch) {
  EngineConfig c = small_config();
  c.speculative = {SpecMethod::kNgram, 3};
  c.speculative.prompt_lookup_min = 2;
  c.speculative.prompt_lookup_max = 3;
  auto proposer = make_proposer(preset_model("tiny"), c);
  auto draft_for = [&](std::vector<int32_t> tokens, int64_t want) {
    Draft d;
    std::unique_ptr<DraftState> state;
    ProposeItem it;
    it.tokens = tokens;
    it.to = static_cast<int64_t>(tokens.size()) - 1;
    it.state = &state;
    it.want = want;
    it.out = &d;
    proposer->propose({&it, 1}, nullptr);
    return d.tokens;
  };
  // [1 2 3] occurred at 0 (followed by 4 9 1) and [2 3] also at 6: the longest match wins.
  EXPECT_EQ(draft_for({1, 2, 3, 4, 9, 7, 2, 3, 8, 1, 2, 3}, 3), (std::vector<int32_t>{4, 9, 7}));
  // Only [2 3] matches: its most recent earlier occurrence (at 6, followed by 8).
  EXPECT_EQ(draft_for({1, 2, 3, 4, 9, 7, 2, 3, 8, 5, 2, 3}, 2), (std::vector<int32_t>{8, 5}));
  // The drafts stop where the context ends; no match, no drafts.
  EXPECT_EQ(draft_for({5, 6, 5, 6}, 3), (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(draft_for({1, 2, 3, 4}, 3).empty());
}

// --- drafts are the same after a prefix-cache hit ------------------------------------------

void expect_warm_drafts_equal_cold(const std::string& preset, SpecMethod method) {
  const dsv4::Model& model = preset_model(preset);
  EngineConfig c = small_config();
  c.speculative.method = method;
  c.speculative.num_tokens = 5;
  c.record_drafts = true;
  // A prefix hit needs a whole block (128) before the draft's context window (128 on these
  // presets), which the engine always recomputes: at least 257 tokens.
  const auto prompt = random_tokens(flint::testing::kSanitized ? 280 : 400, 21);
  auto drafts_of = [&](EngineCore& core, const std::string& id) {
    core.add(request(id, prompt, greedy(8)));
    std::vector<DraftRecord> d;
    while (core.has_work()) {
      for (RequestOutput& ev : core.step()) d.insert(d.end(), ev.drafts.begin(), ev.drafts.end());
    }
    return d;
  };
  EngineCore core(model, c);
  const auto cold = drafts_of(core, "cold");
  const auto warm = drafts_of(core, "warm");
  EXPECT_GT(core.stats().prefix_hits, 0);
  ASSERT_EQ(cold.size(), warm.size());
  ASSERT_FALSE(cold.empty());
  for (size_t i = 0; i < cold.size(); ++i) {
    EXPECT_EQ(cold[i].context, warm[i].context);
    EXPECT_EQ(cold[i].tokens, warm[i].tokens) << "step " << i;
    EXPECT_EQ(cold[i].confidence, warm[i].confidence) << "step " << i;
  }
}

TEST(SpecDraft, DSparkDraftsAfterAPrefixHitEqualTheColdOnes) {
  expect_warm_drafts_equal_cold("tiny-dspark", SpecMethod::kDSpark);
}
TEST(SpecDraft, MtpDraftsAfterAPrefixHitEqualTheColdOnes) {
  expect_warm_drafts_equal_cold("tiny", SpecMethod::kMtp);
}

// Sampled requests with several samples (forked with their draft state), sampled drafts and
// logprobs run to the end with every token accounted for.
TEST(SpecSampling, ForkedSampledRequestsRunThrough) {
  EngineConfig c = small_config();
  c.speculative.method = SpecMethod::kDSpark;
  c.speculative.num_tokens = 4;
  c.speculative.probabilistic_drafts = true;
  EngineCore core(preset_model("tiny-dspark"), c);
  SamplingParams p;
  p.temperature = 0.9;
  p.top_k = 50;
  p.n = 3;
  p.seed = 5;
  p.max_tokens = 12;
  p.ignore_eos = true;
  p.logprobs = 2;
  core.add(request("s", random_tokens(60, 3), p));
  auto out = run_to_end(core);
  ASSERT_TRUE(out["s"].finished);
  for (int32_t k = 0; k < 3; ++k) EXPECT_EQ(out["s"].tokens[k].size(), 12u) << "sample " << k;
  EXPECT_EQ(out["s"].logprobs.size(), 12u);
  EXPECT_EQ(out["s"].usage.completion_tokens, 36);
  EXPECT_GT(core.stats().spec_drafts, 0);
}

TEST(SpecConfig, DSparkRefusesMoreDraftsThanItsBlock) {
  EngineConfig c = small_config();
  c.speculative.method = SpecMethod::kDSpark;
  c.speculative.num_tokens = 6;
  try {
    EngineCore core(preset_model("tiny-dspark"), c);
    FAIL() << "accepted 6 drafts with dspark_block_size 5";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dspark_block_size = 5"), std::string::npos) << e.what();
  }
  c.speculative.num_tokens = 3;
  try {
    EngineCore core(preset_model("tiny"), c);
    FAIL() << "dspark on a checkpoint without DSpark stages";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no DSpark stages"), std::string::npos) << e.what();
  }
  c.speculative.method = SpecMethod::kMtp;
  try {
    EngineCore core(preset_model("tiny-dspark"), c);
    FAIL() << "mtp on a checkpoint whose mtp layers are DSpark stages";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no MTP layer"), std::string::npos) << e.what();
  }
}

// --- lossless sampling ----------------------------------------------------------------------

// Pearson's chi-square of `counts` against probabilities `p` (cells with p > 0).
double chi_square(const std::vector<int64_t>& counts, const std::vector<float>& p, int64_t n) {
  double x = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = static_cast<double>(n) * p[i];
    if (e <= 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    x += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return x;
}

// For a small vocabulary: the target's distribution p (temperature and top-k applied by the
// sampler), a draft distribution q; the token verification emits, over many draws, must
// follow p. `biased` replaces the rejection by a draw from p itself (a classic bug).
std::vector<int64_t> verify_counts(const std::vector<float>& logits, const std::vector<float>& q,
                                   bool greedy_draft, int64_t n, bool biased) {
  SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 6;
  params.seed = 99;
  Sampler target(params, {}, {}, 0);
  Rng draft_rng(7);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int32_t d = 0;
    if (greedy_draft) {
      d = static_cast<int32_t>(std::max_element(q.begin(), q.end()) - q.begin());
    } else {
      double u = draft_rng.uniform(), acc = 0;
      for (size_t t = 0; t < q.size(); ++t) {
        acc += q[t];
        d = static_cast<int32_t>(t);
        if (u < acc) break;
      }
    }
    std::vector<float> row = logits;
    bool ok = false;
    SampleResult r = target.verify(row, d, greedy_draft ? nullptr : &q, &ok);
    if (biased && !ok) {
      row = logits;
      r = target.sample(row);
    }
    ++counts[static_cast<size_t>(r.token)];
  }
  return counts;
}

TEST(SpecSampling, VerificationDrawsExactlyFromTheTargetDistribution) {
  const std::vector<float> logits{1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -3.0f, 0.7f};
  SamplingParams params;
  params.temperature = 0.8;
  params.top_k = 6;
  Sampler probe(params, {}, {}, 0);
  std::vector<float> scratch = logits;
  const std::vector<float> p = probe.distribution(scratch);
  // Far from p, and puts mass where p has none (tokens 2 and 6, cut by top-k); its argmax
  // (the greedy draft) is token 4, which p keeps.
  const std::vector<float> q{0.05f, 0.05f, 0.1f, 0.1f, 0.35f, 0.05f, 0.25f, 0.05f};
  const int64_t n = 20000;
  // 5 kept cells of 6 (top-k 6) -> 5 degrees of freedom; 0.1% critical value 20.52.
  const double critical = 20.52;
  for (bool greedy_draft : {false, true}) {
    const auto good = verify_counts(logits, q, greedy_draft, n, false);
    EXPECT_LT(chi_square(good, p, n), critical) << (greedy_draft ? "greedy" : "sampled") << " drafts";
    const auto bad = verify_counts(logits, q, greedy_draft, n, true);
    EXPECT_GT(chi_square(bad, p, n), critical)
        << "a verifier that redraws from p after a rejection must be caught";
  }
}

}  // namespace
}  // namespace flint::engine
