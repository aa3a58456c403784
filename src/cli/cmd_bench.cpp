// `flint bench MODEL --batch B --prompt-len P --gen-len G [flags]`: the engine's throughput
// on B concurrent requests of random prompt tokens or of windows of a corpus (--prompt-file)
// (greedy, ignore_eos, G tokens each), with or without speculative decoding. One thread
// drives EngineCore::step(), as the engine thread of `flint serve` does; the kernels use the
// thread pool (--threads).
//
// Method (docs/performance.md): plain greedy decoding is always measured; with
// --speculative-config (or --oracle-accept) a second engine speculates. Each engine gets a
// warm-up run, then --repeats timed runs, interleaved plain / speculative, all on the same
// prompts (drawn from --seed) and each run under its own cache salt so that none reads
// another's prefix cache. Per run: prefill = prompt tokens / the time from the first add()
// until every request has its first token; decode = tokens emitted by the steps after that /
// their time. Reported: medians over the timed runs, the decode speed-up (ratio of the
// medians), speculation counters summed over the runs, and how many speculative outputs
// equal the plain ones (greedy speculation is lossless: all of them).
//
// --oracle-accept A selects the oracle method (engine_config.h): the plain warm-up run gives
// each request's continuation, which the speculative runs draft from, each draft token right
// with probability A; drafting costs nothing, so the runs measure what verification gains at
// that acceptance (scripts/spec_curve.py draws the curve).
//
// The report is a list of Figures computed from the runs: throughput, and for plain
// decoding the weights streamed per second against this machine's measured memory read
// bandwidth (the roofline of decoding: dsv4::decode_weight_bytes; the bandwidth is probed
// before each round of runs by reading the resident output head, measure_read_bandwidth_of);
// the text and the JSON output list them without change. Beside them: the peak resident
// memory of the process against the weights' files plus the KV budget.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "base/log.h"
#include "base/memory_bandwidth.h"
#include "base/resident_memory.h"
#include "base/rng.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "cli/ranks.h"
#include "cli/run_flags.h"
#include "cli/token_file.h"
#include "engine/engine_core.h"
#include "formats/checkpoint.h"
#include "kernels/matmul.h"
#include "kernels/peak_flops.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/weight_traffic.h"

namespace flint::cli {
namespace {

using Tokens = std::vector<int32_t>;

struct BenchFlags {
  int64_t batch = 1;
  int64_t prompt_len = 128;
  int64_t gen_len = 32;
  int64_t repeats = 3;
  int64_t seed = 0;
  std::optional<std::string> prompt_file;
  std::string prompt_format = "text";
  std::optional<double> oracle_accept;
  bool json = false;

  void add_to(FlagParser& p) {
    p.add_int("--batch", "concurrent requests", &batch);
    p.add_int("--prompt-len", "random prompt tokens per request", &prompt_len);
    p.add_int("--gen-len", "tokens generated per request (greedy, EOS ignored); at least 2",
              &gen_len);
    p.add_int("--repeats", "timed runs after the warm-up; medians are reported", &repeats);
    p.add_int("--seed", "seed of the random prompts (the same seed gives the same prompts)", &seed);
    p.add_optional_string("--prompt-file",
                          "take the prompts from this corpus instead: B windows of P tokens spread "
                          "evenly over it (speculation then accepts what it would on real text)",
                          &prompt_file);
    p.add_string("--prompt-format",
                 "--prompt-file's format: text (tokenized, BOS first), u16 or i32 (raw ids)",
                 &prompt_format);
    p.add_optional_double(
        "--oracle-accept",
        "speculate with the oracle method: draft each request's continuation from the plain "
        "warm-up run, each draft token right with this probability in [0, 1] (draft "
        "length and adaptive verification from --speculative-config; no method there)",
        &oracle_accept);
    p.add_bool("--json", "print one JSON object on stdout instead of the text report", &json);
  }

  void check() const {
    if (batch < 1) throw UsageError("--batch must be at least 1, got {}", batch);
    if (prompt_len < 1) throw UsageError("--prompt-len must be at least 1, got {}", prompt_len);
    if (gen_len < 2) {
      throw UsageError("--gen-len must be at least 2 (decode starts after the first token), got {}",
                       gen_len);
    }
    if (repeats < 1) throw UsageError("--repeats must be at least 1, got {}", repeats);
    if (oracle_accept && !(*oracle_accept >= 0 && *oracle_accept <= 1)) {
      throw UsageError("--oracle-accept must be in [0, 1], got {}", *oracle_accept);
    }
  }
};

// The oracle's settings: the draft length and the general keys of --speculative-config, the
// method ours. Throws UsageError for keys that pick or configure another method.
engine::SpeculativeConfig oracle_speculative(const SpeculativeArgs& s, double accept) {
  if (s.method != SpecMethod::kNone || s.model) {
    throw UsageError(
        "--oracle-accept selects the oracle method: drop --speculative-config.method and "
        ".model (keep num_speculative_tokens, enable_adaptive_verification)");
  }
  if (s.prompt_lookup_min || s.prompt_lookup_max) {
    throw UsageError("--speculative-config: prompt_lookup_min/max apply only to method ngram");
  }
  engine::SpeculativeConfig c;
  c.method = engine::SpecMethod::kOracle;
  c.num_tokens = s.num_speculative_tokens.value_or(1);
  c.adaptive = s.enable_adaptive_verification;
  c.disable_by_batch_size = s.disable_by_batch_size.value_or(0);
  c.max_model_len = s.max_model_len.value_or(0);
  c.oracle_accept = accept;
  return c;
}

// B prompts of P token ids: drawn uniformly from the vocabulary, or windows of --prompt-file
// at k * (n - P) / B.
std::vector<Tokens> bench_prompts(const BenchFlags& f, const std::string& model_dir,
                                  const dsv4::Config& config) {
  std::vector<Tokens> prompts(static_cast<size_t>(f.batch));
  if (f.prompt_file) {
    const Tokens ids = read_token_file(model_dir, *f.prompt_file, f.prompt_format, config);
    const auto n = static_cast<int64_t>(ids.size());
    if (n < f.prompt_len) {
      throw Error("--prompt-file {}: {} tokens, fewer than --prompt-len {}", *f.prompt_file, n,
                  f.prompt_len);
    }
    const int64_t step = (n - f.prompt_len) / f.batch;
    for (int64_t k = 0; k < f.batch; ++k) {
      const auto first = ids.begin() + k * step;
      prompts[static_cast<size_t>(k)].assign(first, first + f.prompt_len);
    }
    return prompts;
  }
  Rng rng(static_cast<uint64_t>(f.seed) ^ 0xBE7C4ull);
  for (Tokens& p : prompts) {
    for (int64_t j = 0; j < f.prompt_len; ++j)
      p.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(config.vocab_size))));
  }
  return prompts;
}

// The counters of `after` minus those of `before` (gauges such as running and the KV pool
// are `after`'s): what one run added.
engine::EngineStats stats_since(const engine::EngineStats& after,
                                const engine::EngineStats& before) {
  engine::EngineStats d = after;
  d.prefix_queries -= before.prefix_queries;
  d.prefix_hits -= before.prefix_hits;
  d.steps -= before.steps;
  d.step_tokens -= before.step_tokens;
  d.preemptions -= before.preemptions;
  d.generated_tokens -= before.generated_tokens;
  d.spec_drafts -= before.spec_drafts;
  d.spec_draft_tokens -= before.spec_draft_tokens;
  d.spec_accepted_tokens -= before.spec_accepted_tokens;
  for (size_t j = 0; j < d.spec_verified_at.size() && j < before.spec_verified_at.size(); ++j) {
    d.spec_verified_at[j] -= before.spec_verified_at[j];
    d.spec_accepted_at[j] -= before.spec_accepted_at[j];
  }
  d.spec_proposed_tokens -= before.spec_proposed_tokens;
  d.draft_seconds -= before.draft_seconds;
  d.step_seconds -= before.step_seconds;
  d.forward_seconds -= before.forward_seconds;
  return d;
}

// Adds the counters of `part` to `sum`.
void add_stats(engine::EngineStats& sum, const engine::EngineStats& part) {
  sum.prefix_queries += part.prefix_queries;
  sum.prefix_hits += part.prefix_hits;
  sum.steps += part.steps;
  sum.step_tokens += part.step_tokens;
  sum.preemptions += part.preemptions;
  sum.generated_tokens += part.generated_tokens;
  sum.spec_drafts += part.spec_drafts;
  sum.spec_draft_tokens += part.spec_draft_tokens;
  sum.spec_accepted_tokens += part.spec_accepted_tokens;
  sum.spec_verified_at.resize(part.spec_verified_at.size(), 0);
  sum.spec_accepted_at.resize(part.spec_accepted_at.size(), 0);
  for (size_t j = 0; j < part.spec_verified_at.size(); ++j) {
    sum.spec_verified_at[j] += part.spec_verified_at[j];
    sum.spec_accepted_at[j] += part.spec_accepted_at[j];
  }
  sum.spec_proposed_tokens += part.spec_proposed_tokens;
  sum.draft_seconds += part.draft_seconds;
  sum.step_seconds += part.step_seconds;
  sum.forward_seconds += part.forward_seconds;
}

struct RunResult {
  double prefill_seconds = 0;  // from the first add() until every request has a token
  double decode_seconds = 0;   // the steps after that
  int64_t prompt_tokens = 0;
  int64_t decode_tokens = 0;    // emitted by the steps after prefill
  engine::EngineStats stats;    // what this run added to the engine's counters
  std::vector<Tokens> outputs;  // per request, its generated tokens
  double prefill_tokens_per_second() const {
    return static_cast<double>(prompt_tokens) / prefill_seconds;
  }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0.0;
  }
};

// Runs every prompt as one request to completion; `oracle` (kOracle) holds each request's
// prompt plus continuation. Requests are named "<salt>/<index>" and cached under `salt`.
RunResult run_once(engine::EngineCore& core, const std::vector<Tokens>& prompts,
                   const std::vector<Tokens>* oracle, int64_t gen_len, const std::string& salt) {
  const engine::EngineStats before = core.stats();
  RunResult r;
  r.outputs.resize(prompts.size());
  Stopwatch clock;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::EngineRequest q;
    q.id = fmt::format("{}/{}", salt, i);
    q.prompt = prompts[i];
    q.sampling.temperature = 0.0;
    q.sampling.max_tokens = gen_len;
    q.sampling.ignore_eos = true;
    q.cache_salt = salt;
    if (oracle != nullptr) q.oracle_tokens = (*oracle)[i];
    r.prompt_tokens += static_cast<int64_t>(q.prompt.size());
    core.add(std::move(q));
  }
  size_t started = 0;
  double prefill_end = -1;
  while (core.has_work()) {
    const bool decoding = prefill_end >= 0;  // every request had its first token before
    for (engine::RequestOutput& ev : core.step()) {
      if (ev.finish == engine::FinishReason::kError) {
        throw Error("bench request {}: {}", ev.request_id, ev.error);
      }
      const size_t i = std::stoul(ev.request_id.substr(salt.size() + 1));
      Tokens& out = r.outputs[i];
      if (out.empty() && !ev.tokens.empty()) ++started;
      if (decoding) r.decode_tokens += static_cast<int64_t>(ev.tokens.size());
      out.insert(out.end(), ev.tokens.begin(), ev.tokens.end());
    }
    if (!decoding && started == prompts.size()) prefill_end = clock.seconds();
  }
  const double total = clock.seconds();
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (static_cast<int64_t>(r.outputs[i].size()) != gen_len) {
      throw Error("bench request {}: {} tokens generated, expected {}", i, r.outputs[i].size(),
                  gen_len);
    }
  }
  r.prefill_seconds = prefill_end;
  r.decode_seconds = total - prefill_end;
  r.stats = stats_since(core.stats(), before);
  return r;
}

struct Measurement {
  std::vector<RunResult> runs;  // the timed ones
  engine::EngineStats stats;    // summed over them
};

// One engine configuration under measurement.
struct Arm {
  engine::EngineCore* core = nullptr;
  const std::vector<Tokens>* oracle = nullptr;  // kOracle continuations, else null
  Measurement m;
};

// `repeats` timed runs of every arm (each warmed up before), interleaved run by run so that
// a shared machine's drift touches every arm alike. With a probe, each round of runs starts
// with it (the read bandwidth at that moment); returns its values, one per round.
std::vector<double> measure(std::span<Arm> arms, const std::vector<Tokens>& prompts,
                            const BenchFlags& f, const std::function<double()>& probe) {
  std::vector<double> probed;
  for (int64_t k = 0; k < f.repeats; ++k) {
    if (probe) probed.push_back(probe());
    for (size_t i = 0; i < arms.size(); ++i) {
      Arm& a = arms[i];
      a.m.runs.push_back(run_once(*a.core, prompts, a.oracle, f.gen_len, fmt::format("run-{}", k)));
      add_stats(a.m.stats, a.m.runs.back().stats);
      spdlog::debug("bench run {} of arm {}: prefill {:.2f} tokens/s, decode {:.2f} tokens/s",
                    k + 1, i, a.m.runs.back().prefill_tokens_per_second(),
                    a.m.runs.back().decode_tokens_per_second());
    }
  }
  return probed;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The process's peak resident memory against what it is meant to hold: the checkpoint's
// files (mmap'd; the resident part of them counts) and the KV cache budget. What is above
// 100% is activations, buffers and the allocator's slack.
struct MemoryReport {
  int64_t peak_resident = 0;
  int64_t checkpoint = 0;
  int64_t kv_budget = 0;
  double share() const {
    return static_cast<double>(peak_resident) / static_cast<double>(checkpoint + kv_budget);
  }
};

// One reported number: the median over the timed runs of a per-run value, with the values.
struct Figure {
  std::string key;    // name in the JSON object
  std::string label;  // name in the text report
  std::string unit;
  double value = 0;
  std::vector<double> per_run;
};

Figure median_figure(std::string key, std::string label, std::string unit, const Measurement& m,
                     double (RunResult::*per_run)() const) {
  Figure f{std::move(key), std::move(label), std::move(unit), 0, {}};
  for (const RunResult& r : m.runs) f.per_run.push_back((r.*per_run)());
  f.value = median(f.per_run);
  return f;
}

std::vector<Figure> throughput_figures(const Measurement& m) {
  return {median_figure("prefill_tokens_per_second", "prefill", "tokens/s", m,
                        &RunResult::prefill_tokens_per_second),
          median_figure("decode_tokens_per_second", "decode", "tokens/s", m,
                        &RunResult::decode_tokens_per_second)};
}

// Plain decoding against the memory roofline, per run: weights streamed per second (the
// step's expected weight bytes times steps per second), the read bandwidth measured for
// that run, and the first as a share of the second.
std::vector<Figure> roofline_figures(const Measurement& m, double step_bytes, int64_t batch,
                                     const std::vector<double>& bandwidth) {
  Figure rate{"weight_gb_per_second", "weights", "GB/s read", 0, {}};
  Figure probe{"read_bandwidth_gb_per_second", "probe", "GB/s measured read bandwidth", 0, {}};
  Figure share{"roofline_percent", "roofline", "% of the measured read bandwidth", 0, {}};
  for (size_t k = 0; k < m.runs.size(); ++k) {
    const double bytes_per_second =
        step_bytes * m.runs[k].decode_tokens_per_second() / static_cast<double>(batch);
    rate.per_run.push_back(bytes_per_second / 1e9);
    probe.per_run.push_back(bandwidth[k] / 1e9);
    share.per_run.push_back(100.0 * bytes_per_second / bandwidth[k]);
  }
  for (Figure* f : {&rate, &probe, &share}) f->value = median(f->per_run);
  return {rate, probe, share};
}

// The output head is read by every decode step, so it is resident while the runs go; a
// head of at least this size is far larger than the caches and serves as the probe's
// region. Smaller (test) models get one probe over a buffer of its own after the runs.
constexpr std::size_t kHeadProbeMinBytes = std::size_t{128} << 20;

// Prefill against the arithmetic roofline, per run: the weight products' FLOP/s and that as
// a share of the measured float32 multiply-add peak (what the kernels use).
std::vector<Figure> compute_figures(const Measurement& m, double flops_per_token,
                                    double peak_flops) {
  Figure rate{"prefill_gflops", "prefill", "GFLOP/s in weight products", 0, {}};
  Figure share{"prefill_peak_percent", "peak", "% of the measured f32 FMA peak", 0, {}};
  for (const RunResult& r : m.runs) {
    const double flops = flops_per_token * r.prefill_tokens_per_second();
    rate.per_run.push_back(flops / 1e9);
    share.per_run.push_back(100.0 * flops / peak_flops);
  }
  rate.value = median(rate.per_run);
  share.value = median(share.per_run);
  return {rate, share};
}

nlohmann::json speculation_json(const engine::SpeculativeConfig& sc, const engine::EngineStats& s,
                                int64_t runs) {
  const auto ratio = [](int64_t a, int64_t b) {
    return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  nlohmann::json by_position = nlohmann::json::array();
  for (size_t j = 0; j < s.spec_verified_at.size(); ++j)
    by_position.push_back(ratio(s.spec_accepted_at[j], s.spec_verified_at[j]));
  nlohmann::json j{{"method", engine::spec_method_name(sc.method)},
                   {"num_speculative_tokens", sc.num_tokens},
                   {"adaptive", sc.adaptive},
                   {"timed_runs", runs},
                   {"drafts", s.spec_drafts},
                   {"draft_tokens", s.spec_draft_tokens},
                   {"accepted_tokens", s.spec_accepted_tokens},
                   {"proposed_tokens", s.spec_proposed_tokens},
                   {"acceptance_rate", ratio(s.spec_accepted_tokens, s.spec_draft_tokens)},
                   {"mean_accepted_length", ratio(s.spec_accepted_tokens, s.spec_drafts)},
                   {"acceptance_by_position", by_position},
                   {"draft_seconds", s.draft_seconds},
                   {"forward_seconds", s.forward_seconds}};
  if (sc.method == engine::SpecMethod::kOracle) j["oracle_accept"] = sc.oracle_accept;
  return j;
}

std::string describe_config(const engine::SpeculativeConfig& sc) {
  if (!sc.enabled()) return "no speculative decoding";
  std::string text = fmt::format("speculative decoding: {}", engine::spec_method_name(sc.method));
  if (sc.method == engine::SpecMethod::kOracle) {
    text += fmt::format(" (each draft token right with probability {})", sc.oracle_accept);
  }
  text += fmt::format(", {} draft token(s) per step", sc.num_tokens);
  if (sc.adaptive) text += ", adaptive verification";
  return text;
}

int run_bench(std::span<const std::string> args) {
  std::string model_dir;
  BenchFlags bench;
  RunFlags run;
  ParallelFlags parallel;
  EngineFlags engine_flags;
  FlagParser parser(
      "bench MODEL --batch B --prompt-len P --gen-len G [flags]",
      "Measures the engine's prefill and decode throughput on B concurrent requests of random "
      "prompt tokens or of --prompt-file windows (greedy, EOS ignored, G tokens each): plain "
      "decoding and, with "
      "--speculative-config or --oracle-accept, speculative decoding beside it. Per "
      "configuration a warm-up run, then --repeats timed runs on the same prompts, "
      "interleaved; medians, and the decode speed-up. --max-model-len defaults to P + G here.");
  parser.positional("MODEL", "DeepSeek-V4 checkpoint directory", &model_dir);
  parser.group("Bench");
  bench.add_to(parser);
  engine_flags.add_to(parser);
  parser.group("Run");
  run.add_to(parser);
  parser.group("Parallel");
  parallel.add_to(parser);
  if (!parser.parse(args)) return kExitOk;
  bench.check();
  const engine::DebugFault fault = engine::DebugFault::parse_optional(parallel.debug_fault);
  std::optional<engine::SpeculativeConfig> oracle_config;
  if (bench.oracle_accept) {
    oracle_config = oracle_speculative(engine_flags.speculative, *bench.oracle_accept);
  } else {
    engine_flags.resolve_speculative(model_dir);
  }
  if (engine_flags.max_model_len == 0)
    engine_flags.max_model_len = bench.prompt_len + bench.gen_len;
  const QuantSimulation sim = run.apply();

  Ranks ranks =
      Ranks::start(parallel.tensor_parallel_size, static_cast<double>(parallel.collective_timeout));
  // The peak resident memory starts over here (where the kernel allows), so that what
  // start-up allocated and freed is not in the peak held against weights + KV budget.
  reset_peak_resident();
  auto model = ranks.load_model(model_dir, parallel.expert_parallel, fault);
  const dsv4::Config& config = model->config();
  const auto checkpoint_bytes = static_cast<int64_t>(Checkpoint::open(model_dir).total_bytes());
  engine::EngineConfig ec = engine_flags.config(config, checkpoint_bytes);
  ec.quant_simulation = sim;
  ec.debug_fault = fault;
  if (oracle_config) ec.speculative = *oracle_config;
  if (!ranks.leader()) {  // rank 0 runs the benchmark; this rank runs its steps
    engine::follow_rank0(*model, ec, *ranks.comm(), fault);
    return kExitOk;
  }
  const std::vector<Tokens> prompts = bench_prompts(bench, model_dir, config);

  // Plain greedy decoding is always measured: it is the baseline that speculation is judged
  // against (speed-up = ratio of the medians of interleaved runs) and its warm-up run gives
  // the outputs every speculative run must reproduce (speculation is lossless) and, for the
  // oracle, the continuations it drafts from.
  engine::EngineConfig plain_config = ec;
  plain_config.speculative = engine::SpeculativeConfig{};
  engine::EngineCore plain_core(*model, plain_config);
  const std::vector<Tokens> plain_outputs =
      run_once(plain_core, prompts, nullptr, bench.gen_len, "warm-up").outputs;
  std::vector<Arm> arms{Arm{&plain_core, nullptr, {}}};
  std::vector<Tokens> oracle;
  std::optional<engine::EngineCore> spec_core;
  if (ec.speculative.enabled()) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      oracle.push_back(prompts[i]);
      oracle.back().insert(oracle.back().end(), plain_outputs[i].begin(), plain_outputs[i].end());
    }
    spec_core.emplace(*model, ec);
    const std::vector<Tokens>* continuations = bench.oracle_accept ? &oracle : nullptr;
    run_once(*spec_core, prompts, continuations, bench.gen_len, "warm-up");
    arms.push_back(Arm{&*spec_core, continuations, {}});
  }
  // The roofline: what this machine can read with the same threads, measured before each
  // round of runs (a probe once at start made the share move with the machine's load
  // between the probe and the runs: 57-76% for one build within minutes).
  const WeightMatrix& head = model->weights().head;
  const bool probe_head = head.data_bytes() >= kHeadProbeMinBytes;
  std::function<double()> probe;
  if (probe_head)
    probe = [&head] { return measure_read_bandwidth_of(head.data, head.data_bytes()); };
  std::vector<double> bandwidth = measure(arms, prompts, bench, probe);
  const Measurement& plain = arms.front().m;
  const Measurement* spec = arms.size() > 1 ? &arms.back().m : nullptr;
  const double step_bytes = dsv4::decode_weight_bytes(model->weights(), config, bench.batch);
  const MemoryReport memory{peak_resident_bytes(), checkpoint_bytes, ec.kv_cache_bytes};
  // The peak is read: a buffer of the probe's own no longer counts.
  if (!probe_head) bandwidth.assign(static_cast<size_t>(bench.repeats), measure_read_bandwidth());
  const double flops_per_token = dsv4::prefill_matmul_flops_per_token(model->weights(), config);
  const kernels::PeakFlops peak = kernels::measure_peak_flops();
  std::vector<Figure> plain_figures = throughput_figures(plain);
  for (Figure& f : roofline_figures(plain, step_bytes, bench.batch, bandwidth))
    plain_figures.push_back(std::move(f));
  for (Figure& f : compute_figures(plain, flops_per_token, peak.f32_fma))
    plain_figures.push_back(std::move(f));
  std::vector<Figure> spec_figures;
  int64_t same = 0;  // speculative outputs equal to the plain ones, in every timed run
  double speedup = 0;
  if (spec) {
    spec_figures = throughput_figures(*spec);
    speedup = spec_figures[1].value / plain_figures[1].value;
    for (size_t i = 0; i < prompts.size(); ++i) {
      same += std::all_of(spec->runs.begin(), spec->runs.end(),
                          [&](const RunResult& r) { return r.outputs[i] == plain_outputs[i]; });
    }
    if (same != bench.batch) {
      spdlog::warn("{} of {} speculative outputs differ from the plain greedy run's",
                   bench.batch - same, bench.batch);
    }
  }

  const auto threads = static_cast<int64_t>(thread_pool().size());
  if (bench.json) {
    auto measurement_json = [](const Measurement& m, const std::vector<Figure>& figures) {
      nlohmann::json j;
      for (const Figure& f : figures) j[f.key] = f.value;
      nlohmann::json runs = nlohmann::json::array();
      for (size_t k = 0; k < m.runs.size(); ++k) {
        const RunResult& r = m.runs[k];
        nlohmann::json one{{"prefill_seconds", r.prefill_seconds},
                           {"decode_seconds", r.decode_seconds},
                           {"decode_tokens", r.decode_tokens},
                           {"steps", r.stats.steps},
                           {"forward_seconds", r.stats.forward_seconds}};
        for (const Figure& f : figures) one[f.key] = f.per_run[k];
        runs.push_back(std::move(one));
      }
      j["runs"] = std::move(runs);
      return j;
    };
    nlohmann::json j{{"model", model_dir},
                     {"batch", bench.batch},
                     {"prompt_len", bench.prompt_len},
                     {"gen_len", bench.gen_len},
                     {"repeats", bench.repeats},
                     {"seed", bench.seed},
                     {"threads", threads},
                     {"plain", measurement_json(plain, plain_figures)},
                     {"decode_weight_bytes_per_step", step_bytes},
                     {"memory_read_bandwidth_gb_per_second", median(bandwidth) / 1e9},
                     {"memory_read_bandwidth_probe", probe_head ? "head" : "buffer"},
                     {"prefill_flops_per_token", flops_per_token},
                     {"peak_f32_fma_gflops", peak.f32_fma / 1e9},
                     {"peak_bf16_dot_gflops", peak.bf16_dot / 1e9},
                     {"peak_resident_bytes", memory.peak_resident},
                     {"checkpoint_bytes", memory.checkpoint},
                     {"kv_cache_bytes", memory.kv_budget},
                     {"matmul_kernels", kernels::matmul_isa()}};
    if (spec) {
      j["speculative"] = measurement_json(*spec, spec_figures);
      j["speculative"]["config"] = speculation_json(ec.speculative, spec->stats, bench.repeats);
      j["decode_speedup"] = speedup;
      j["outputs_equal_plain"] = same;
    }
    fmt::print("{}\n", j.dump());
    return kExitOk;
  }
  fmt::print(
      "bench {}: batch {}, {} prompt + {} generated tokens per request, {} thread(s); {} "
      "timed run(s) per configuration after a warm-up, interleaved\n",
      model_dir, bench.batch, bench.prompt_len, bench.gen_len, threads, bench.repeats);
  auto print_figures = [](const std::string& title, const std::vector<Figure>& figures) {
    fmt::print("{}\n", title);
    for (const Figure& f : figures) {
      std::string values;
      for (double v : f.per_run) values += fmt::format("{}{:.2f}", values.empty() ? "" : ", ", v);
      fmt::print("  {:<8} {:>10.2f} {}  (median of {}: {})\n", f.label, f.value, f.unit,
                 f.per_run.size(), values);
    }
  };
  fmt::print(
      "weights read per decode step (expected, {} sequence(s)): {:.1f} MB; memory read "
      "bandwidth measured with {} thread(s): {:.2f} GB/s (median; {})\n",
      bench.batch, step_bytes / 1e6, threads, median(bandwidth) / 1e9,
      probe_head ? "the output head read before each round of runs"
                 : "a 512 MiB buffer read once after the runs");
  fmt::print(
      "weight products per prompt token: {:.3f} GFLOP; peak measured with {} thread(s): f32 FMA "
      "{:.1f} GFLOP/s, bf16 dot {:.1f} GFLOP/s; matmul kernels: {}\n",
      flops_per_token / 1e9, threads, peak.f32_fma / 1e9, peak.bf16_dot / 1e9,
      kernels::matmul_isa());
  fmt::print(
      "peak resident memory {:.2f} GiB = {:.1f}% of weights file {:.2f} GiB + KV budget {:.2f} "
      "GiB\n",
      memory.peak_resident / kGiB, 100.0 * memory.share(), memory.checkpoint / kGiB,
      memory.kv_budget / kGiB);
  print_figures("plain decoding", plain_figures);
  if (spec) {
    print_figures(describe_config(ec.speculative), spec_figures);
    fmt::print("decode speed-up {:.3f}x (speculative / plain median)\n", speedup);
    fmt::print("over the timed runs: {}\n", describe_speculation(spec->stats));
    fmt::print("{} of {} outputs equal the plain greedy run's\n", same, bench.batch);
  }
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("bench", "measure prefill and decode tokens/s, with or without speculative decoding",
              run_bench);

}  // namespace flint::cli
