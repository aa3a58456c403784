// The engine's own overhead: everything in a step but the forward pass (scheduling, KV
// bookkeeping, sampling, events), at 1, 16 and 64 running sequences decoding on the tiny
// preset. The target: under 5% of the step time at 64 sequences.
//
//   build/bench/flint_engine_bench [--benchmark_filter=...]
// Counters per step: step_ms, forward_ms, overhead_ms and overhead_pct (medians over the
// repetitions are what docs/performance.md quotes).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "base/log.h"
#include "base/rng.h"
#include "engine/engine_core.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

namespace flint::engine {
namespace {

const dsv4::Model& tiny_model() {
  static std::unique_ptr<dsv4::Model> model = [] {
    init_logging("warning");
    auto dir = std::filesystem::temp_directory_path() / "flint-engine-bench-tiny";
    if (!std::filesystem::exists(dir / "config.json")) {
      dsv4::write_tiny_checkpoint(dir, dsv4::tiny_preset("tiny"), {});
    }
    LoadOptions o;
    o.log = false;
    return dsv4::load_model(dir, o);
  }();
  return *model;
}

void decode_step(benchmark::State& state, bool sampled) {
  const int64_t seqs = state.range(0);
  EngineConfig c;
  c.max_model_len = 4096;
  c.max_num_seqs = seqs;
  c.block_size = 256;
  c.kv_cache_pages = 0;
  const kv::KvLayout l = kv::make_kv_layout(tiny_model().config(), c.block_size, c.kv_dtype);
  c.kv_cache_pages = (seqs + 2) * l.pages_for_tokens(c.max_model_len);
  EngineCore core(tiny_model(), c);
  Rng rng(1);
  for (int64_t i = 0; i < seqs; ++i) {
    EngineRequest r;
    r.id = std::to_string(i);
    for (int k = 0; k < 64; ++k) r.prompt.push_back(static_cast<int32_t>(2 + rng.below(100000)));
    r.sampling.temperature = sampled ? 0.8 : 0.0;
    r.sampling.top_p = sampled ? 0.95 : 1.0;
    r.sampling.top_k = sampled ? 50 : 0;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = 4000;
    core.add(std::move(r));
  }
  while (core.stats().running < seqs || core.stats().last_step_tokens != seqs) core.step();
  const EngineStats before = core.stats();
  for (auto _ : state) core.step();
  const EngineStats after = core.stats();
  const double steps = static_cast<double>(after.steps - before.steps);
  const double step_s = (after.step_seconds - before.step_seconds) / steps;
  const double fwd_s = (after.forward_seconds - before.forward_seconds) / steps;
  state.counters["step_ms"] = step_s * 1e3;
  state.counters["forward_ms"] = fwd_s * 1e3;
  state.counters["overhead_ms"] = (step_s - fwd_s) * 1e3;
  state.counters["overhead_pct"] = 100.0 * (step_s - fwd_s) / step_s;
  state.counters["tokens_per_s"] = static_cast<double>(seqs) / step_s;
}

void BM_EngineDecodeGreedy(benchmark::State& state) { decode_step(state, false); }
void BM_EngineDecodeSampled(benchmark::State& state) { decode_step(state, true); }

BENCHMARK(BM_EngineDecodeGreedy)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_EngineDecodeSampled)->Arg(1)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace
}  // namespace flint::engine
