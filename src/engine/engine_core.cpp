#include "engine/engine_core.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "base/hash.h"
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
  if (const int ranks = comm_size(model.comm()); ranks > 1) {
    // Blocks computed across ranks differ from one rank's in float32 rounding (another
    // summation order): the disk tier keeps them apart.
    o.model_identity =
        hash_combine(o.model_identity,
                     static_cast<uint64_t>(ranks) * 2 + (model.parallel().expert_parallel ? 1 : 0));
  }
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
      scheduler_(config_, cache_),
      proposer_(config_.speculative.enabled() ? make_proposer(model, config_) : nullptr) {
  if (comm_size(model.comm()) > 1) {
    const bool draft_everywhere = proposer_ && proposer_->runs_on_every_rank();
    ranks_ = std::make_unique<StepSender>(
        *model.comm(), cache_, config_.debug_fault,
        draft_everywhere ? config_.speculative.method : SpecMethod::kNone,
        config_.speculative.num_tokens);
  }
  if (proposer_) {
    scheduler_.set_min_uncomputed(proposer_->context_window());
    stats_.spec_verified_at.assign(static_cast<size_t>(config_.speculative.num_tokens), 0);
    stats_.spec_accepted_at.assign(static_cast<size_t>(config_.speculative.num_tokens), 0);
    if (config_.speculative.adaptive) {
      adaptive_ = std::make_unique<AdaptiveVerifier>(config_.speculative.num_tokens);
      profile_steps();
    }
    spdlog::info("speculative decoding: {} drafts of up to {} tokens per step{}", proposer_->name(),
                 config_.speculative.num_tokens, adaptive_ ? ", adaptive verification" : "");
  }
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
    spdlog::info(
        "KV cache: an fp8 row takes {} bytes, {:.0f}% of bf16's {}", l.kv_format.bytes(),
        100.0 * static_cast<double>(l.kv_format.bytes()) / static_cast<double>(2 * l.kv_format.dim),
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
  seq->sampler = std::make_unique<Sampler>(p, req.prompt, model_.config().eos_token_ids, fallback);
  seq->draft_rng = Rng(p.seed.value_or(fallback) ^ 0xD8AF7C0FFEEull);
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
  ev.usage.queue_seconds =
      r.queue_seconds >= 0
          ? r.queue_seconds
          : std::chrono::duration<double>(std::chrono::steady_clock::now() - r.added).count();
  for (auto& seq : r.samples) draft_log_.erase(seq.get());
  requests_.erase(it);
  return ev;
}

void EngineCore::idle() {
  if (ranks_) ranks_->heartbeat();
}

std::vector<RequestOutput> EngineCore::step() {
  Stopwatch total;
  std::vector<RequestOutput> events;
  if (adaptive_) {
    adaptive_->tick();
    choose_drafts();
  }
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
  std::vector<dsv4::KvUndo> undos(out.scheduled.size());
  std::vector<std::vector<int32_t>> with_drafts(out.scheduled.size());
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledSeq& s = out.scheduled[i];
    Sequence& seq = *s.seq;
    RequestState& r = *seq.request;
    if (r.queue_seconds < 0) r.queue_seconds = std::chrono::duration<double>(now - r.added).count();
    std::span<const int32_t> tokens =
        std::span<const int32_t>(seq.tokens)
            .subspan(static_cast<size_t>(seq.num_computed),
                     static_cast<size_t>(s.num_tokens - s.num_drafts));
    if (s.num_drafts > 0) {  // the last token and the drafts, verified in one pass
      auto& v = with_drafts[i];
      v.assign(tokens.begin(), tokens.end());
      v.insert(v.end(), seq.draft.tokens.begin(), seq.draft.tokens.begin() + s.num_drafts);
      tokens = v;
    }
    batch.push_back({&cache_.sequence(*seq.kv), tokens, s.num_drafts > 0,
                     s.num_drafts > 0 ? &undos[i] : nullptr});
  }
  if (ranks_) {
    std::vector<StepItem> items;
    for (size_t i = 0; i < batch.size(); ++i)
      items.push_back({*out.scheduled[i].seq->kv, batch[i].tokens, batch[i].all_logits,
                       batch[i].undo != nullptr});
    ranks_->forward(items);
  }
  dsv4::ForwardTrace trace;
  const bool tracing = proposer_ && proposer_->wants_trace();
  if (tracing) proposer_->request_trace(trace);
  Stopwatch forward;
  std::vector<float> logits =
      model_.forward(batch, config_.quant_simulation, tracing ? &trace : nullptr);
  const double forward_seconds = forward.seconds();
  stats_.forward_seconds += forward_seconds;
  if (adaptive_) adaptive_->cost().observe(out.num_tokens, forward_seconds);
  update(out, logits, undos, tracing ? &trace : nullptr, events);
  ++stats_.steps;
  stats_.step_tokens += out.num_tokens;
  stats_.last_step_tokens = out.num_tokens;
  stats_.step_seconds += total.seconds();
  return events;
}

void EngineCore::update(const SchedulerOutput& out, std::vector<float>& logits,
                        std::vector<dsv4::KvUndo>& undos, const dsv4::ForwardTrace* trace,
                        std::vector<RequestOutput>& events) {
  const int64_t V = model_.config().vocab_size;
  struct Due {
    Sequence* seq;
    std::span<float> rows;  // k + 1 rows with k drafts, else one
    int64_t drafts = 0;
    size_t index = 0;  // in out.scheduled (and undos)
    std::vector<SampleResult> results;
    int64_t accepted = 0;
  };
  std::vector<Due> due;
  due.reserve(out.scheduled.size());
  std::vector<int64_t> from(out.scheduled.size());
  std::vector<std::pair<Sequence*, size_t>> forked;  // samples forked now, by their parent
  int64_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledSeq& s = out.scheduled[i];
    Sequence& seq = *s.seq;
    from[i] = seq.num_computed;
    const int64_t n_rows = s.num_drafts > 0 ? s.num_tokens : 1;
    std::span<float> rows(logits.data() + row * V, static_cast<size_t>(n_rows * V));
    row += n_rows;
    if (s.num_drafts > 0) {  // committed after verification
      seq.num_computed += s.num_tokens - s.num_drafts;
      due.push_back({&seq, rows, s.num_drafts, i, {}, 0});
      continue;
    }
    seq.num_computed += s.num_tokens;
    cache_.commit(
        *seq.kv, std::span<const int32_t>(seq.tokens).first(static_cast<size_t>(seq.num_computed)));
    if (seq.uncomputed() > 0) continue;  // a prompt chunk: nothing to sample yet
    RequestState& r = *seq.request;
    if (r.request.sampling.n > 1 && !r.forked) {
      const size_t before = r.samples.size();
      fork_samples(r, seq);
      for (size_t k = before; k < r.samples.size(); ++k) {
        if (r.samples[k]->kv) forked.emplace_back(r.samples[k].get(), i);
      }
    }
    // Samples forked from this one just now share its prompt and sample from the same
    // logits: kept before the sampler changes them, and sampled here (rare: once a request).
    auto first_token_due = [](const Sequence& child) {
      return child.num_generated() == 0 && !child.finished && child.uncomputed() == 0;
    };
    if (&seq != r.samples[0].get() || !r.forked ||
        std::none_of(r.samples.begin() + 1, r.samples.end(),
                     [&](const auto& c) { return first_token_due(*c); })) {
      due.push_back({&seq, rows, 0, i, {}, 0});
      continue;
    }
    raw_row_.assign(rows.begin(), rows.end());
    record(seq, seq.sampler->sample(rows));
    for (size_t k = 1; k < r.samples.size(); ++k) {
      Sequence& child = *r.samples[k];
      if (!first_token_due(child)) continue;
      row_.assign(raw_row_.begin(), raw_row_.end());
      record(child, child.sampler->sample(row_));
    }
  }
  // Each sequence has its own sampler and generator, so they sample (and verify drafts) in
  // parallel (a pass over the vocabulary per token, the engine's largest cost of its own)
  // with the same results. A sequence's tokens are recorded below, in order, so that a stop
  // condition met by an accepted draft ends it there.
  parallel_for(due.size(), 1, [&](size_t begin, size_t end) {
    for (size_t k = begin; k < end; ++k) {
      Due& d = due[k];
      Sampler& sampler = *d.seq->sampler;
      for (int64_t j = 0; j <= d.drafts; ++j) {
        std::span<float> r = d.rows.subspan(static_cast<size_t>(j * V), static_cast<size_t>(V));
        if (j == d.drafts) {  // every draft accepted (or none): the next token
          d.results.push_back(sampler.sample(r));
          break;
        }
        const Draft& draft = d.seq->draft;
        bool ok = false;
        d.results.push_back(
            sampler.verify(r, draft.tokens[static_cast<size_t>(j)],
                           draft.q.empty() ? nullptr : &draft.q[static_cast<size_t>(j)], &ok));
        if (!ok) break;
        sampler.accept(d.results.back().token);
        ++d.accepted;
      }
    }
  });
  for (Due& d : due) {
    Sequence& seq = *d.seq;
    for (size_t j = 0; j < d.results.size() && !seq.finished; ++j) {
      // Accepted drafts were given to the sampler already.
      record(seq, std::move(d.results[j]), static_cast<int64_t>(j) < d.accepted);
    }
    if (d.drafts == 0) continue;
    const int64_t keep = 1 + d.accepted;  // the last token and the accepted drafts
    ++stats_.spec_drafts;
    stats_.spec_draft_tokens += d.drafts;
    stats_.spec_accepted_tokens += d.accepted;
    for (int64_t j = 0; j < d.drafts; ++j) {
      ++stats_.spec_verified_at[static_cast<size_t>(j)];
      if (j < d.accepted) ++stats_.spec_accepted_at[static_cast<size_t>(j)];
    }
    if (adaptive_) adaptive_->observe(seq.draft.confidence, d.drafts, d.accepted);
    if (config_.record_drafts) {
      const Draft& dr = seq.draft;
      draft_log_[&seq].push_back(
          {seq.num_computed - 1, seq.tokens[static_cast<size_t>(seq.num_computed - 1)],
           std::vector<int32_t>(dr.tokens.begin(), dr.tokens.begin() + d.drafts),
           std::vector<float>(
               dr.confidence.begin(),
               dr.confidence.begin() +
                   std::min<int64_t>(d.drafts, static_cast<int64_t>(dr.confidence.size()))),
           d.accepted});
    }
    seq.draft.clear();
    if (seq.finished) continue;  // its KV is freed below
    if (ranks_) ranks_->rollback(d.index, keep);
    model_.rollback(cache_.sequence(*seq.kv), undos[d.index], keep, config_.quant_simulation);
    seq.num_computed += d.accepted;
    cache_.commit(
        *seq.kv, std::span<const int32_t>(seq.tokens).first(static_cast<size_t>(seq.num_computed)));
  }
  if (proposer_) propose(out, from, forked, trace);
  // Each sequence's tokens of this step go out as one event; finished ones by finish().
  for (const ScheduledSeq& s : out.scheduled) {
    for (auto& seq : s.seq->request->samples) {
      if (!seq->finished && seq->num_generated() > seq->emitted)
        emit(*seq, FinishReason::kNone, events);
    }
  }
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
  for (const auto& id : done) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    for (auto& seq : it->second->samples) draft_log_.erase(seq.get());
    requests_.erase(it);
  }
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

void EngineCore::record(Sequence& seq, SampleResult res, bool sampler_accepted) {
  if (!sampler_accepted) seq.sampler->accept(res.token);
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
  if (auto it = draft_log_.find(&seq); it != draft_log_.end()) {
    ev.drafts = std::move(it->second);
    it->second.clear();
  }
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
