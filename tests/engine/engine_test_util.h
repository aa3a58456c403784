// Shared by the engine tests: the tiny model, engine configurations small enough to force
// paging, preemption and chunking, and the independent truth a request is compared with:
// the model run directly on one contiguous SequenceState, greedy, one token per call.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/rng.h"
#include "engine/engine_core.h"
#include "model/deepseek_v4/model.h"
#include "tiny_fixture.h"

namespace flint::engine::testutil {

inline const dsv4::Model& tiny_model() {
  static std::unique_ptr<dsv4::Model> model = [] {
    init_logging("warning");  // the engine's start-up lines, once per test, are noise here
    LoadOptions o;
    o.log = false;
    return dsv4::load_model(flint::testing::tiny_checkpoint(), o);
  }();
  return *model;
}

// The model of a make-tiny preset ("tiny", "tiny-dspark"), loaded once.
inline const dsv4::Model& preset_model(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<dsv4::Model>> models;
  auto& m = models[preset];
  if (!m) {
    if (preset == "tiny") return tiny_model();
    init_logging("warning");
    LoadOptions o;
    o.log = false;
    m = dsv4::load_model(flint::testing::tiny_checkpoint(preset), o);
  }
  return *m;
}

inline std::vector<int32_t> random_tokens(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  // Below the special tokens (EOS 1 is avoided so that prompts never contain it by luck).
  for (auto& x : t) x = static_cast<int32_t>(2 + rng.below(120000));
  return t;
}

inline EngineConfig small_config(int64_t pages = 0) {
  EngineConfig c;
  c.max_model_len = 1024;
  c.block_size = 128;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.kv_dtype = kernels::KvDtype::kFp8;
  c.kv_cache_pages = pages;
  if (pages == 0) {
    const kv::KvLayout l = kv::make_kv_layout(tiny_model().config(), c.block_size, c.kv_dtype);
    c.kv_cache_pages = 64 * l.pages_for_tokens(c.max_model_len);
  }
  return c;
}

inline EngineRequest request(std::string id, std::vector<int32_t> prompt, SamplingParams p) {
  EngineRequest r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.sampling = std::move(p);
  return r;
}

inline SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Greedy continuation computed directly with the model on a contiguous store.
inline std::vector<int32_t> greedy_alone(const std::vector<int32_t>& prompt, int64_t n,
                                         kernels::KvDtype dtype = kernels::KvDtype::kFp8) {
  const dsv4::Model& m = tiny_model();
  dsv4::SequenceState s = m.new_sequence(dtype);
  dsv4::ForwardRequest req{&s, prompt, false};
  std::vector<float> logits = m.forward({&req, 1}, QuantSimulation::kOfficial);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    if (i + 1 == n) break;
    dsv4::ForwardRequest step{&s, {&out.back(), 1}, false};
    logits = m.forward({&step, 1}, QuantSimulation::kOfficial);
  }
  return out;
}

struct Collected {
  std::map<int32_t, std::vector<int32_t>> tokens;  // per sample
  std::map<int32_t, FinishReason> finish;
  std::vector<SampleResult> logprobs;  // sample 0
  bool finished = false;
  Usage usage;
  int64_t events = 0;
};

// Adds a step's events to `out`, by request id.
inline void collect(std::map<std::string, Collected>& out,
                    const std::vector<RequestOutput>& events) {
  for (const RequestOutput& ev : events) {
    Collected& c = out[ev.request_id];
    ++c.events;
    auto& t = c.tokens[ev.sample];
    t.insert(t.end(), ev.tokens.begin(), ev.tokens.end());
    if (ev.sample == 0) c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    if (ev.finish != FinishReason::kNone) c.finish[ev.sample] = ev.finish;
    if (ev.request_finished) {
      EXPECT_FALSE(c.finished) << ev.request_id << " finished twice";
      c.finished = true;
      c.usage = ev.usage;
    }
  }
}

// Steps the core until it has no work, collecting every event by request id.
inline std::map<std::string, Collected> run_to_end(EngineCore& core,
                                                   std::map<std::string, Collected> out = {},
                                                   int64_t max_steps = 100000) {
  for (int64_t i = 0; i < max_steps && core.has_work(); ++i) collect(out, core.step());
  EXPECT_FALSE(core.has_work()) << "the engine did not finish in " << max_steps << " steps";
  return out;
}

}  // namespace flint::engine::testutil
