// The threaded engine: submissions and aborts from several threads while the engine thread
// steps; every request gets exactly one final event; shutdown with work left aborts it.
// Also run under ThreadSanitizer (scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "engine/engine.h"
#include "engine_test_util.h"

namespace flint::engine {
namespace {

using testutil::greedy;
using testutil::random_tokens;
using testutil::tiny_model;

TEST(EngineThreads, ConcurrentSubmitAndAbort) {
  Engine engine(tiny_model(), testutil::small_config());
  std::atomic<int> finals{0}, tokens{0}, aborted{0};
  const int kThreads = 3, kPerThread = 6;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        EngineRequest r;
        r.id = std::to_string(t) + "-" + std::to_string(i);
        r.prompt = random_tokens(5 + 7 * i, static_cast<uint64_t>(t * 100 + i));
        r.sampling = greedy(4);
        engine.submit(std::move(r), [&](const RequestOutput& ev) {
          tokens += static_cast<int>(ev.tokens.size());
          if (ev.finish == FinishReason::kAbort) ++aborted;
          if (ev.request_finished) ++finals;
        });
        if (i % 3 == 2) engine.abort(std::to_string(t) + "-" + std::to_string(i - 1));
      }
    });
  }
  for (auto& th : threads) th.join();
  engine.wait_idle();
  EXPECT_EQ(finals.load(), kThreads * kPerThread);
  EXPECT_LE(tokens.load(), kThreads * kPerThread * 4);
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.kv_pages_used, 0);
  EXPECT_EQ(s.running + s.waiting, 0);
}

TEST(EngineThreads, BlockingQueueAndShutdownWithWorkLeft) {
  std::shared_ptr<OutputQueue> q;
  {
    Engine engine(tiny_model(), testutil::small_config());
    auto prompt = random_tokens(20, 9);
    EngineRequest r;
    r.id = "q";
    r.prompt = prompt;
    r.sampling = greedy(3);
    auto done = engine.submit(r);
    std::vector<int32_t> got;
    RequestOutput ev;
    while (done->pop(ev)) got.insert(got.end(), ev.tokens.begin(), ev.tokens.end());
    EXPECT_EQ(got, testutil::greedy_alone(prompt, 3));
    r.id = "left";
    r.sampling = greedy(1000);
    q = engine.submit(r);
  }  // the destructor aborts "left"
  RequestOutput ev, last;
  while (q->pop(ev)) last = ev;
  EXPECT_EQ(last.finish, FinishReason::kAbort);
  EXPECT_TRUE(last.request_finished);
}

TEST(EngineThreads, InvalidRequestIsRefusedOnTheCallersThread) {
  Engine engine(tiny_model(), testutil::small_config());
  EngineRequest r;
  r.id = "bad";
  r.prompt = {1, 2, 999999};
  EXPECT_THROW(engine.submit(r, [](const RequestOutput&) {}), Error);
  engine.wait_idle();
  EXPECT_EQ(engine.stats().running, 0);
}

}  // namespace
}  // namespace flint::engine
