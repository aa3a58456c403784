// The scheduler as tables of expected steps over a simulated generation loop (the KV
// cache is real, the model is not: sequences advance without computing anything).
#include <gtest/gtest.h>

#include <memory>

#include "base/error.h"
#include "engine/scheduler.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

namespace flint::engine {
namespace {

struct Sim {
  dsv4::Config model = dsv4::tiny_preset("tiny");
  EngineConfig config;
  std::unique_ptr<kv::KvCache> cache;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;

  explicit Sim(int64_t budget, int64_t pages, int64_t max_seqs = 16, bool chunked = true) {
    config.max_num_batched_tokens = budget;
    config.max_num_seqs = max_seqs;
    config.enable_chunked_prefill = chunked;
    config.block_size = 128;
    kv::KvCacheOptions o;
    o.block_size = 128;
    o.num_pages = pages;
    o.prefix_caching = false;
    cache = std::make_unique<kv::KvCache>(model, o);
    scheduler = std::make_unique<Scheduler>(config, *cache);
  }
  Sequence* add(int64_t prompt, int64_t max_tokens) {
    auto s = std::make_unique<Sequence>();
    s->tokens.assign(static_cast<size_t>(prompt), 7);
    s->prompt_len = prompt;
    s->max_tokens = max_tokens;
    scheduler->add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }
  // One step: returns tokens scheduled per sequence index (-1: not scheduled).
  std::vector<int64_t> step(SchedulerOutput* out_copy = nullptr) {
    SchedulerOutput out = scheduler->schedule();
    std::vector<int64_t> got(seqs.size(), -1);
    for (const ScheduledSeq& s : out.scheduled) {
      for (size_t i = 0; i < seqs.size(); ++i)
        if (seqs[i].get() == s.seq) got[i] = s.num_tokens;
      cache->sequence(*s.seq->kv).advance(s.num_tokens);
      s.seq->num_computed += s.num_tokens;
      cache->commit(*s.seq->kv, s.seq->tokens);
      if (s.seq->uncomputed() == 0) {
        s.seq->tokens.push_back(9);
        if (s.seq->num_generated() >= s.seq->max_tokens) {
          s.seq->finished = true;
          scheduler->remove(s.seq);
        }
      }
    }
    if (out_copy != nullptr) *out_copy = out;
    return got;
  }
  int64_t pages_for(int64_t tokens) const { return cache->layout().pages_for_tokens(tokens); }
};

TEST(Scheduler, LongPromptIsChunkedAndDecodesGoFirst) {
  Sim sim(256, 4000);
  sim.add(10, 100);
  sim.add(20, 100);
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{10, 20}));
  sim.add(1000, 5);
  // Every decode, then a chunk filling the rest of the budget.
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 1, 254}));
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 1, 254}));
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 1, 254}));
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 1, 238}));  // the prompt's last chunk
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 1, 1}));
}

TEST(Scheduler, FirstComeFirstServedWithinTheBudget) {
  Sim sim(100, 4000);
  sim.add(60, 3);
  sim.add(60, 3);
  sim.add(30, 3);
  // The second prompt takes the rest of the budget as a chunk; the third waits its turn.
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{60, 40, -1}));
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 20, 30}));
}

TEST(Scheduler, MaxNumSeqsCapsTheRunningBatch) {
  Sim sim(1000, 4000, /*max_seqs=*/2);
  sim.add(5, 2);
  sim.add(5, 2);
  sim.add(5, 2);
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{5, 5, -1}));
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 1, -1}));  // both finish (2 tokens)
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{-1, -1, 5}));
}

TEST(Scheduler, WithoutChunkingAPromptWaitsForAWholeStep) {
  Sim sim(100, 4000, 16, /*chunked=*/false);
  sim.add(60, 5);
  sim.add(60, 5);
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{60, -1}));
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{1, 60}));
}

TEST(Scheduler, PreemptsTheMostRecentlyAdmitted) {
  // Room for three one-block sequences; the first to need a second block preempts the
  // youngest, which goes back to the front of the queue and recomputes later.
  Sim probe(1000, 100);
  const int64_t ppb = probe.cache->layout().pages_per_block();
  Sim sim(1000, 3 * ppb + 1);
  Sequence* a = sim.add(120, 50);
  sim.add(100, 50);
  Sequence* c = sim.add(100, 50);
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{120, 100, 100}));
  for (int i = 0; i < 8; ++i) sim.step();  // a reaches 128 tokens
  SchedulerOutput out;
  auto got = sim.step(&out);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], c);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[2], -1);
  EXPECT_EQ(sim.scheduler->waiting().front(), c);
  EXPECT_EQ(c->num_computed, 0);
  EXPECT_FALSE(c->kv.has_value());
  EXPECT_EQ(a->num_computed, 129);
  EXPECT_EQ(sim.scheduler->num_preemptions(), 1);
}

TEST(Scheduler, ASequenceThatCannotGrowPreemptsItselfLast) {
  Sim probe(1000, 100);
  const int64_t ppb = probe.cache->layout().pages_per_block();
  Sim sim(1000, ppb + 1);  // one block: the only sequence cannot grow past it
  Sequence* a = sim.add(128, 5);
  EXPECT_EQ(sim.step(), (std::vector<int64_t>{128}));
  SchedulerOutput out;
  sim.step(&out);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], a);
  EXPECT_TRUE(out.scheduled.empty());
}

TEST(Scheduler, RemoveReleasesEverything) {
  Sim sim(64, 4000);
  Sequence* a = sim.add(500, 5);
  sim.add(10, 5);
  sim.step();
  sim.scheduler->remove(a);  // mid-prompt
  sim.scheduler->remove(sim.seqs[1].get());
  EXPECT_EQ(sim.cache->num_free_pages(), 4000);
  EXPECT_TRUE(sim.scheduler->running().empty());
  EXPECT_TRUE(sim.scheduler->waiting().empty());
}

}  // namespace
}  // namespace flint::engine

namespace flint::engine {
namespace {

TEST(DebugFault, ParsesAndRefuses) {
  const DebugFault f = DebugFault::parse("1:stall:3");
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.action, DebugFault::Action::kStall);
  EXPECT_EQ(f.step, 3);
  EXPECT_EQ(DebugFault::parse("0:die:start-up").step, -1);
  EXPECT_EQ(DebugFault::parse_optional("").action, DebugFault::Action::kNone);
  for (const char* bad : {"1:stall", "x:die:3", "1:explode:3", "1:fail:-4", "-1:fail:2"})
    EXPECT_THROW(DebugFault::parse(bad), Error) << bad;
  // Not this rank or not this step: nothing happens; the failure is an error.
  EXPECT_NO_THROW(f.trigger(0, 3));
  EXPECT_NO_THROW(DebugFault::parse("0:fail:2").trigger(0, 1));
  EXPECT_THROW(DebugFault::parse("0:fail:2").trigger(0, 2), Error);
}

}  // namespace
}  // namespace flint::engine
