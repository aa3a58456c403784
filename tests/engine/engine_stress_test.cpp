// Hundreds of requests of random lengths, random sampling settings and random aborts, on a
// pool small enough to force preemption and with shared prefixes so that prefix hits,
// evictions and recomputation interleave. Every token is accounted for, no KV page leaks,
// nothing stalls, and greedy outputs equal the model run alone.
#include <gtest/gtest.h>

#include <set>

#include "engine_test_util.h"

namespace flint::engine {
namespace {

using testutil::random_tokens;
using testutil::tiny_model;

TEST(EngineStress, RandomRequestsAbortsAndPreemption) {
  EngineConfig c = testutil::small_config();
  c.max_model_len = 400;
  c.max_num_seqs = 12;
  c.max_num_batched_tokens = 192;
  const kv::KvLayout l = kv::make_kv_layout(tiny_model().config(), c.block_size, c.kv_dtype);
  // Room for about three long sequences (under a sanitizer, with fewer requests, less than
  // two): twelve seats cannot all hold their KV.
  const bool small = flint::testing::kSanitized;
  c.kv_cache_pages = (small ? 1 : 3) * l.pages_for_tokens(c.max_model_len) + 3 * l.num_layers;
  EngineCore core(tiny_model(), c);

  const int kRequests = small ? 40 : 200;
  Rng rng(2026);
  const auto shared = random_tokens(260, 77);
  struct Req {
    std::vector<int32_t> prompt;
    SamplingParams p;
    bool aborted = false;
    std::vector<int32_t> got;
    int finished = 0;
    FinishReason finish = FinishReason::kNone;
  };
  std::vector<Req> reqs(kRequests);
  std::set<int> live;
  int next = 0, steps = 0;
  auto handle = [&](const std::vector<RequestOutput>& events) {
    for (const RequestOutput& ev : events) {
      Req& r = reqs[static_cast<size_t>(std::stoi(ev.request_id))];
      EXPECT_EQ(ev.sample, 0);
      r.got.insert(r.got.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finish != FinishReason::kNone) r.finish = ev.finish;
      if (ev.request_finished) {
        ++r.finished;
        live.erase(std::stoi(ev.request_id));
      }
    }
  };
  while (next < kRequests || core.has_work()) {
    // Arrivals: a few per step.
    for (int k = static_cast<int>(rng.below(4)); k > 0 && next < kRequests; --k, ++next) {
      Req& r = reqs[static_cast<size_t>(next)];
      const int64_t len = 1 + static_cast<int64_t>(rng.below(300));
      if (rng.below(3) == 0) {  // a third share a long prefix
        r.prompt.assign(shared.begin(), shared.begin() + std::min<int64_t>(len, 260));
        auto tail = random_tokens(1 + static_cast<int64_t>(rng.below(40)), 1000 + next);
        r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
      } else {
        r.prompt = random_tokens(len, 5000 + next);
      }
      r.p.max_tokens = 1 + static_cast<int64_t>(rng.below(8));
      r.p.ignore_eos = true;
      if (rng.below(2) == 0) {
        r.p.temperature = 0;
      } else {
        r.p.temperature = 0.5 + rng.uniform();
        r.p.top_k = static_cast<int64_t>(rng.below(50));
        r.p.top_p = 0.5 + 0.5 * rng.uniform();
        r.p.presence_penalty = rng.uniform();
        if (rng.below(2) == 0) r.p.seed = rng.next_u64();
      }
      EngineRequest er;
      er.id = std::to_string(next);
      er.prompt = r.prompt;
      er.sampling = r.p;
      core.add(std::move(er));
      live.insert(next);
    }
    // Aborts: now and then, a random live request.
    if (!live.empty() && rng.below(10) == 0) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.below(live.size())));
      const int id = *it;
      auto ev = core.abort(std::to_string(id));
      ASSERT_TRUE(ev.has_value());
      reqs[static_cast<size_t>(id)].aborted = true;
      handle({*ev});
    }
    handle(core.step());
    ASSERT_LT(++steps, 20000) << "no progress";
  }

  const auto s = core.stats();
  EXPECT_GT(s.preemptions, 0) << "the pool should be too small for every seat";
  EXPECT_GT(s.prefix_hits, 0);
  EXPECT_EQ(s.kv_pages_used, 0) << "KV pages leaked";
  EXPECT_EQ(s.kv_pages_free, s.kv_pages_total);
  EXPECT_EQ(s.running + s.waiting, 0);
  int checked = 0;
  for (int i = 0; i < kRequests; ++i) {
    Req& r = reqs[static_cast<size_t>(i)];
    EXPECT_EQ(r.finished, 1) << "request " << i;
    if (r.aborted) {
      EXPECT_EQ(r.finish, FinishReason::kAbort);
      EXPECT_LE(static_cast<int64_t>(r.got.size()), *r.p.max_tokens);
      continue;
    }
    EXPECT_EQ(r.finish, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(static_cast<int64_t>(r.got.size()), *r.p.max_tokens) << "request " << i;
    // Greedy requests against the model alone (every third, to bound the time).
    if (r.p.temperature == 0 && i % 3 == 0) {
      EXPECT_EQ(r.got, testutil::greedy_alone(r.prompt, *r.p.max_tokens)) << "request " << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, kRequests / 10);
  RecordProperty("steps", std::to_string(steps));
  RecordProperty("preemptions", std::to_string(s.preemptions));
  RecordProperty("prefix_hits", std::to_string(s.prefix_hits));
}

}  // namespace
}  // namespace flint::engine
