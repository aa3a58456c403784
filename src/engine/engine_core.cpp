#include "engine/engine_core.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/thread_pool.h"
#include "base/timer.h"

namespace flint::engine {

namespace {

kv::KvCacheOptions cache_options(const dsv4::Model& model, const EngineConfig& c) {
  kv::KvCacheOptions o;
  o.block_size = c.block_size;
  o.dtype = c.kv_dtype;
  o.num_pages = kv_pool_pages(model.config(), c);
  o.prefix_caching = c.enable_prefix_caching;
  o.model_identity = model.identity();
  if (c.kv_offloading_gib && *c.kv_offloading_gib > 0) {
    o.disk = kv::DiskTierOptions{c.kv_offloading_dir,
                                 static_cast<int64_t>(*c.kv_offloading_gib * (1 << 30)), 0};
  }
  return o;
}

EngineConfig resolved(EngineConfig c, const dsv4::Config& model) {
  if (c.max_model_len <= 0) c.max_model_len = model.max_position_embeddings;
  if (c.max_model_len > model.max_position_embeddings) {
    throw Error("--max-model-len {} is above the model's max_position_embeddings {}",
                c.max_model_len, model.max_position_embeddings);
  }
  if (c.max_num_seqs < 1) throw Error("--max-num-seqs must be at least 1");
  if (c.max_num_batched_tokens < 1) throw Error("--max-num-batched-tokens must be at least 1");
  if (!c.enable_chunked_prefill && c.max_num_batched_tokens < c.max_model_len) {
    throw Error(
        "--max-num-batched-tokens {} is below --max-model-len {}: without chunked prefill a "
        "whole prompt must fit one step (enable chunked prefill or raise the budget)",
        c.max_num_batched_tokens, c.max_model_len);
  }
  return c;
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

int64_t kv_pool_pages(const dsv4::Config& model, const EngineConfig& c) {
  if (c.kv_cache_pages > 0) return c.kv_cache_pages;
  const kv::KvLayout layout = kv::make_kv_layout(model, c.block_size, c.kv_dtype);
  return c.kv_cache_bytes / layout.page_bytes;
}

EngineCore::EngineCore(const dsv4::Model& model, EngineConfig config)
    : model_(model),
      config_(resolved(std::move(config), model.config())),
      cache_(model.config(), cache_options(model, config_)),
      scheduler_(config_, cache_) {
  const kv::KvLayout& l = cache_.layout();
  const int64_t pages = cache_.stats().pages_total;
  // One sequence of max_model_len tokens must fit, with the window pages of a full step's
  // chunk (every block a chunk touches holds its window pages until the step ends).
  const int64_t blocks = (config_.max_model_len + l.block_size - 1) / l.block_size;
  const int64_t chunk_blocks = config_.max_num_batched_tokens / l.block_size + 2;
  const int64_t need =
      blocks * l.history_pages + std::min(blocks, l.window_blocks() + chunk_blocks) * l.num_layers;
  const double gib = static_cast<double>(pages * l.page_bytes) / (1 << 30);
  if (pages < need) {
    throw Error(
        "the KV cache has {} pages ({:.2f} GiB) but one sequence of --max-model-len {} tokens "
        "needs {} pages ({:.2f} GiB): lower --max-model-len or --max-num-batched-tokens, or "
        "give the cache more memory (--kv-cache-memory-bytes, --gpu-memory-utilization)",
        pages, gib, config_.max_model_len, need,
        static_cast<double>(need * l.page_bytes) / (1 << 30));
  }
  const int64_t tokens_fit =
      (pages - l.window_blocks() * l.num_layers) / std::max(1, l.history_pages) * l.block_size;
  spdlog::info("KV cache: {}", l.describe());
  spdlog::info(
      "KV cache: per token {:.0f} bytes of compressed entries, indexer keys and boundary "
      "state; {:.0f} bytes of window rows over all layers, held for the last {} tokens only",
      l.compressed_bytes_per_token(), l.window_bytes_per_token(), l.sliding_window);
  if (l.kv_format.dtype == kernels::KvDtype::kFp8) {
    spdlog::info("KV cache: an fp8 row takes {} bytes, {:.0f}% of bf16's {}", l.kv_format.bytes(),
                 100.0 * static_cast<double>(l.kv_format.bytes()) /
                     static_cast<double>(2 * l.kv_format.dim),
                 2 * l.kv_format.dim);
  }
  spdlog::info(
      "KV cache: {} pages, {:.2f} GiB; holds {} tokens in one sequence; maximum concurrency "
      "for {} tokens per request: {:.2f}x",
      pages, gib, tokens_fit, config_.max_model_len,
      static_cast<double>(pages) / static_cast<double>(l.pages_for_tokens(config_.max_model_len)));
}

void EngineCore::validate(const EngineRequest& r) const {
  const int64_t vocab = model_.config().vocab_size;
  const int64_t len = static_cast<int64_t>(r.prompt.size());
  if (r.prompt.empty()) throw Error("prompt: is empty (give at least one token)");
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    if (r.prompt[i] < 0 || r.prompt[i] >= vocab) {
      throw Error("prompt: token id {} at position {} is outside the vocabulary [0, {})",
                  r.prompt[i], i, vocab);
    }
  }
  flint::validate(r.sampling, SamplingLimits{vocab, config_.max_logprobs});
  const int64_t mml = config_.max_model_len;
  if (len >= mml) {
    throw Error(
        "prompt: {} tokens leave no room below the maximum context length {} "
        "(--max-model-len)",
        len, mml);
  }
  if (r.sampling.max_tokens && len + *r.sampling.max_tokens > mml) {
    throw Error(
        "max_tokens: the prompt's {} tokens plus max_tokens {} make {}, above the maximum "
        "context length {} (--max-model-len)",
        len, *r.sampling.max_tokens, len + *r.sampling.max_tokens, mml);
  }
}

std::unique_ptr<Sequence> EngineCore::new_sequence(RequestState& r, int32_t sample) {
  auto seq = std::make_unique<Sequence>();
  const EngineRequest& req = r.request;
  seq->request = &r;
  seq->sample = sample;
  seq->tokens = req.prompt;
  seq->prompt_len = static_cast<int64_t>(req.prompt.size());
  seq->cache_salt = req.cache_salt;
  seq->max_tokens = req.sampling.max_tokens.value_or(config_.max_model_len - seq->prompt_len);
  // Samples of one request differ; a request's own seed makes each reproducible.
  SamplingParams p = req.sampling;
  if (p.seed) p.seed = *p.seed + static_cast<uint64_t>(sample);
  const uint64_t fallback = config_.seed ^ std::hash<std::string>{}(req.id) ^
                            (static_cast<uint64_t>(sample) * 0x9E3779B97F4A7C15ull);
  seq->sampler =
      std::make_unique<Sampler>(p, req.prompt, model_.config().eos_token_ids, fallback);
  return seq;
}

void EngineCore::add(EngineRequest request) {
  validate(request);
  if (requests_.count(request.id) != 0) {
    throw Error("request id '{}' is already running", request.id);
  }
  auto r = std::make_unique<RequestState>();
  r->request = std::move(request);
  r->added = std::chrono::steady_clock::now();
  r->samples.push_back(new_sequence(*r, 0));
  scheduler_.add(r->samples[0].get());
  const std::string id = r->request.id;
  requests_.emplace(id, std::move(r));
}

std::optional<RequestOutput> EngineCore::abort(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return std::nullopt;
  RequestState& r = *it->second;
  for (auto& seq : r.samples) {
    if (!seq->finished) scheduler_.remove(seq.get());
  }
  RequestOutput ev;
  ev.request_id = id;
  ev.finish = FinishReason::kAbort;
  ev.request_finished = true;
  ev.usage.prompt_tokens = static_cast<int64_t>(r.request.prompt.size());
  for (auto& seq : r.samples) ev.usage.completion_tokens += seq->num_generated();
  ev.usage.cached_prompt_tokens = std::max<int64_t>(0, r.samples[0]->cached_prompt);
  ev.usage.queue_seconds = r.queue_seconds >= 0
                               ? r.queue_seconds
                               : std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                               r.added)
                                     .count();
  requests_.erase(it);
  return ev;
}

std::vector<RequestOutput> EngineCore::step() {
  Stopwatch total;
  std::vector<RequestOutput> events;
  SchedulerOutput out = scheduler_.schedule();
  stats_.preemptions = scheduler_.num_preemptions();
  if (out.scheduled.empty()) {
    // With the pool checked at start-up, the oldest running or waiting sequence always
    // fits; an empty step with work left is a bug, never a silent spin.
    FLINT_CHECK(!has_work(), "the scheduler found nothing to run: {} running, {} waiting",
                scheduler_.running().size(), scheduler_.waiting().size());
    return events;
  }
  std::vector<dsv4::ForwardRequest> batch;
  batch.reserve(out.scheduled.size());
  const auto now = std::chrono::steady_clock::now();
  for (const ScheduledSeq& s : out.scheduled) {
    RequestState& r = *s.seq->request;
    if (r.queue_seconds < 0) r.queue_seconds = std::chrono::duration<double>(now - r.added).count();
    batch.push_back({&cache_.sequence(*s.seq->kv),
                     std::span<const int32_t>(s.seq->tokens)
                         .subspan(static_cast<size_t>(s.seq->num_computed),
                                  static_cast<size_t>(s.num_tokens)),
                     false});
  }
  Stopwatch forward;
  std::vector<float> logits = model_.forward(batch, config_.quant_simulation);
  stats_.forward_seconds += forward.seconds();
  update(out, logits, events);
  ++stats_.steps;
  stats_.step_tokens += out.num_tokens;
  stats_.last_step_tokens = out.num_tokens;
  stats_.step_seconds += total.seconds();
  return events;
}

void EngineCore::update(const SchedulerOutput& out, std::vector<float>& logits,
                        std::vector<RequestOutput>& events) {
  const int64_t V = model_.config().vocab_size;
  struct Due {
    Sequence* seq;
    std::span<float> row;
    SampleResult result;
  };
  std::vector<Due> due;
  due.reserve(out.scheduled.size());
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    Sequence& seq = *out.scheduled[i].seq;
    seq.num_computed += out.scheduled[i].num_tokens;
    cache_.commit(*seq.kv, std::span<const int32_t>(seq.tokens)
                               .first(static_cast<size_t>(seq.num_computed)));
    if (seq.uncomputed() > 0) continue;  // a prompt chunk: nothing to sample yet
    // The sampler works in place on the step's logits row (no copy per sequence).
    std::span<float> row(logits.data() + static_cast<int64_t>(i) * V, static_cast<size_t>(V));
    RequestState& r = *seq.request;
    if (r.request.sampling.n > 1 && !r.forked) fork_samples(r, seq);
    // Samples forked from this one just now share its prompt and sample from the same
    // logits: kept before the sampler changes them, and sampled here (rare: once a request).
    auto first_token_due = [](const Sequence& child) {
      return child.num_generated() == 0 && !child.finished && child.uncomputed() == 0;
    };
    if (&seq != r.samples[0].get() || !r.forked ||
        std::none_of(r.samples.begin() + 1, r.samples.end(),
                     [&](const auto& c) { return first_token_due(*c); })) {
      due.push_back({&seq, row, {}});
      continue;
    }
    raw_row_.assign(row.begin(), row.end());
    record(seq, seq.sampler->sample(row), events);
    for (size_t k = 1; k < r.samples.size(); ++k) {
      Sequence& child = *r.samples[k];
      if (!first_token_due(child)) continue;
      row_.assign(raw_row_.begin(), raw_row_.end());
      record(child, child.sampler->sample(row_), events);
    }
  }
  // Each sequence has its own sampler and generator, so they sample in parallel (a pass
  // over the vocabulary each, the engine's largest cost of its own) with the same results.
  parallel_for(due.size(), 1, [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) due[k].result = due[k].seq->sampler->sample(due[k].row);
  });
  for (Due& d : due) record(*d.seq, std::move(d.result), events);
  // Finished sequences were marked by record(); report and free them in order.
  for (const ScheduledSeq& s : out.scheduled) {
    RequestState& r = *s.seq->request;
    for (auto& seq : r.samples) {
      if (seq->finished && seq->kv) finish(*seq, FinishReason::kNone, events);
    }
  }
  std::vector<std::string> done;
  for (const ScheduledSeq& s : out.scheduled) {
    if (s.seq->request->finished == static_cast<int64_t>(s.seq->request->samples.size()))
      done.push_back(s.seq->request->request.id);
  }
  for (const auto& id : done) requests_.erase(id);
}

void EngineCore::fork_samples(RequestState& r, Sequence& parent) {
  r.forked = true;
  for (int32_t k = 1; k < r.request.sampling.n; ++k) {
    r.samples.push_back(new_sequence(r, k));
    Sequence& child = *r.samples.back();
    child.cached_prompt = 0;
    std::optional<kv::KvCache::SeqId> kv = cache_.fork(*parent.kv);
    if (kv) {
      child.kv = kv;
      child.num_computed = parent.num_computed;
      scheduler_.add_running(&child);
    } else {
      scheduler_.add(&child);  // no room to copy: it recomputes (or hits the prefix cache)
    }
  }
}

void EngineCore::record(Sequence& seq, SampleResult res, std::vector<RequestOutput>& events) {
  seq.sampler->accept(res.token);
  seq.tokens.push_back(res.token);
  if (seq.request->request.sampling.logprobs) seq.logprobs.push_back(std::move(res));
  ++stats_.generated_tokens;
  const SamplingParams& p = seq.request->request.sampling;
  const auto& eos = model_.config().eos_token_ids;
  const int32_t t = seq.tokens.back();
  if (!p.ignore_eos && std::find(eos.begin(), eos.end(), t) != eos.end()) {
    seq.finish_reason = FinishReason::kStop;
    seq.stop_token = t;
  } else if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), t) !=
             p.stop_token_ids.end()) {
    seq.finish_reason = FinishReason::kStop;
    seq.stop_token = t;
  } else if (seq.sampler->forced_stop()) {
    seq.finish_reason = FinishReason::kStop;
  } else if (seq.num_generated() >= seq.max_tokens ||
             static_cast<int64_t>(seq.tokens.size()) >= config_.max_model_len) {
    seq.finish_reason = FinishReason::kLength;
  }
  seq.finished = seq.finish_reason != FinishReason::kNone;
  if (!seq.finished) emit(seq, FinishReason::kNone, events);  // finished ones: by finish()
}

void EngineCore::emit(Sequence& seq, FinishReason reason, std::vector<RequestOutput>& events) {
  RequestOutput ev;
  RequestState& r = *seq.request;
  ev.request_id = r.request.id;
  ev.sample = seq.sample;
  const int64_t from = seq.prompt_len + seq.emitted;
  ev.tokens.assign(seq.tokens.begin() + from, seq.tokens.end());
  if (!seq.logprobs.empty()) {
    ev.logprobs.assign(seq.logprobs.begin() + seq.emitted, seq.logprobs.end());
  }
  seq.emitted = seq.num_generated();
  ev.finish = reason;
  ev.stop_token = reason == FinishReason::kNone ? std::nullopt : seq.stop_token;
  if (reason != FinishReason::kNone && r.finished == static_cast<int64_t>(r.samples.size()) &&
      (r.forked || r.request.sampling.n == 1)) {
    ev.request_finished = true;
    ev.usage.prompt_tokens = seq.prompt_len;
    for (auto& s : r.samples) ev.usage.completion_tokens += s->num_generated();
    ev.usage.cached_prompt_tokens = std::max<int64_t>(0, r.samples[0]->cached_prompt);
    ev.usage.queue_seconds = std::max(0.0, r.queue_seconds);
  }
  events.push_back(std::move(ev));
}

void EngineCore::finish(Sequence& seq, FinishReason, std::vector<RequestOutput>& events) {
  scheduler_.remove(&seq);
  ++seq.request->finished;
  emit(seq, seq.finish_reason, events);
}

EngineStats EngineCore::stats() const {
  EngineStats s = stats_;
  s.running = static_cast<int64_t>(scheduler_.running().size());
  s.waiting = static_cast<int64_t>(scheduler_.waiting().size());
  s.kv = cache_.stats();
  s.kv_pages_total = s.kv.pages_total;
  s.kv_pages_free = s.kv.pages_free;
  s.kv_pages_cached = s.kv.pages_cached_free;
  s.kv_pages_used = s.kv.pages_total - s.kv.pages_free;
  s.prefix_queries = s.kv.prefix_queries;
  s.prefix_hits = s.kv.prefix_hits;
  return s;
}

}  // namespace flint::engine
