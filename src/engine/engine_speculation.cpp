// EngineCore's speculative decoding outside one step's flow (engine_core.cpp verifies and
// rolls back): how many drafts a sequence may get, asking the proposer for them, adaptive
// verification's choice and start-up profile, and the statistics line.
#include <algorithm>

#include <fmt/format.h>

#include "base/timer.h"
#include "engine/engine_core.h"

namespace flint::engine {

std::string describe_speculation(const EngineStats& s) {
  const auto pct = [](int64_t a, int64_t b) {
    return b > 0 ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0;
  };
  std::string per;
  for (size_t j = 0; j < s.spec_verified_at.size(); ++j) {
    per +=
        fmt::format("{}{:.1f}%", j ? " " : "", pct(s.spec_accepted_at[j], s.spec_verified_at[j]));
  }
  return fmt::format(
      "speculation: {} drafts verified, {} of {} draft tokens accepted ({:.1f}%), {:.2f} "
      "accepted per draft (+1 token of the target's own); acceptance by position: {}; {} "
      "drafted in all; drafting {:.3f} s, forward passes {:.3f} s",
      s.spec_drafts, s.spec_accepted_tokens, s.spec_draft_tokens,
      pct(s.spec_accepted_tokens, s.spec_draft_tokens),
      s.spec_drafts > 0
          ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_drafts)
          : 0.0,
      per.empty() ? "-" : per, s.spec_proposed_tokens, s.draft_seconds, s.forward_seconds);
}

int64_t EngineCore::drafts_wanted(const Sequence& seq) const {
  const SpeculativeConfig& sc = config_.speculative;
  if (seq.finished || seq.uncomputed() != 1) return 0;
  if (adaptive_ && !adaptive_->drafting()) return 0;
  const auto len = static_cast<int64_t>(seq.tokens.size());
  if (sc.max_model_len > 0 && len > sc.max_model_len) return 0;
  if (sc.disable_by_batch_size > 0 &&
      static_cast<int64_t>(scheduler_.running().size()) > sc.disable_by_batch_size)
    return 0;
  // The step feeds the last token and k drafts at positions len - 1 .. len - 1 + k, and
  // emits up to k + 1 tokens: both must stay within the limits.
  int64_t k = sc.num_tokens;
  k = std::min(k, seq.max_tokens - seq.num_generated() - 1);
  k = std::min(k, config_.max_model_len - len);
  return std::max<int64_t>(0, k);
}

void EngineCore::propose(const SchedulerOutput& out, const std::vector<int64_t>& from,
                         const std::vector<std::pair<Sequence*, size_t>>& forked,
                         const dsv4::ForwardTrace* trace) {
  Stopwatch clock;
  std::vector<ProposeItem> items;
  // For the other ranks (a draft model split over them): each item's KV sequence, and the
  // sequence whose draft state it starts from (a fork's parent) or -1.
  std::vector<kv::KvCache::SeqId> seqs, clone_of;
  auto add = [&](Sequence& seq, size_t i, int64_t seq_from, kv::KvCache::SeqId parent) {
    if (seq.finished || !seq.kv) return;
    seqs.push_back(*seq.kv);
    clone_of.push_back(parent);
    ProposeItem it;
    it.tokens = seq.tokens;
    it.from = seq_from;
    it.to = seq.num_computed;
    if (trace != nullptr) {
      it.trace_from = seq_from + trace->first_token[i];
      it.trace_row = trace->first_row[i];
    }
    it.state = &seq.draft_state;
    it.want = drafts_wanted(seq);
    it.sampler = seq.sampler.get();
    it.probabilistic =
        config_.speculative.probabilistic_drafts && seq.request->request.sampling.temperature > 0;
    it.rng = &seq.draft_rng;
    it.oracle = seq.request->request.oracle_tokens;
    seq.draft.clear();
    it.out = &seq.draft;
    items.push_back(it);
  };
  for (size_t i = 0; i < out.scheduled.size(); ++i) add(*out.scheduled[i].seq, i, from[i], -1);
  for (const auto& [child, i] : forked) {
    // A forked sample continues from its parent's context (before this step's rows).
    Sequence& parent = *out.scheduled[i].seq;
    const bool cloned = parent.draft_state && parent.draft_state->length() == from[i];
    if (cloned) child->draft_state = parent.draft_state->clone();
    add(*child, i, from[i], cloned && parent.kv ? *parent.kv : -1);
  }
  if (ranks_ && proposer_->runs_on_every_rank()) ranks_->propose(items, seqs, clone_of);
  proposer_->propose(items, trace);
  int64_t drafting = 0;
  for (const ProposeItem& it : items) {
    if (it.want > 0) ++drafting;
    stats_.spec_proposed_tokens += static_cast<int64_t>(it.out->tokens.size());
  }
  const double seconds = clock.seconds();
  stats_.draft_seconds += seconds;
  if (adaptive_) adaptive_->observe_drafting(drafting, seconds);
}

void EngineCore::choose_drafts() {
  std::vector<Draft*> drafts;
  int64_t plain = 0;
  for (Sequence* seq : scheduler_.running()) {
    plain += seq->uncomputed();
    if (!seq->draft.tokens.empty()) drafts.push_back(&seq->draft);
  }
  if (drafts.empty()) return;
  plain = std::min(plain, config_.max_num_batched_tokens);
  adaptive_->choose(drafts, plain);
}

void profile_forward_times(const dsv4::Model& model, int64_t max_tokens, kernels::KvDtype dtype,
                           QuantSimulation sim,
                           const std::function<void(int64_t, double)>& observe) {
  // Forward time at the token counts a decode step with drafts has (one sequence of t
  // tokens: the weights are read once per step either way), medians of three. The tokens
  // differ, as a draft's do: on MoE layers each brings its own experts (a repeated token
  // would read one set and look cheap).
  std::vector<int32_t> tokens(static_cast<size_t>(max_tokens));
  const int64_t vocab = model.config().vocab_size;
  for (int64_t i = 0; i < max_tokens; ++i)
    tokens[static_cast<size_t>(i)] = static_cast<int32_t>((1 + i * 7919) % vocab);
  dsv4::SequenceState st = model.new_sequence(dtype);
  std::vector<int32_t> warm(64, 0);
  dsv4::ForwardRequest pre{&st, warm, false, nullptr};
  model.forward({&pre, 1}, sim);
  for (int64_t t = 1; t <= max_tokens; ++t) {
    double times[3];
    for (double& x : times) {
      dsv4::KvUndo undo;
      dsv4::ForwardRequest req{&st, std::span<const int32_t>(tokens).first(static_cast<size_t>(t)),
                               true, &undo};
      Stopwatch clock;
      model.forward({&req, 1}, sim);
      x = clock.seconds();
      model.rollback(st, undo, 0, sim);
    }
    std::sort(std::begin(times), std::end(times));
    if (observe) observe(t, times[1]);
  }
}

void EngineCore::profile_steps() {
  // Real steps refine the table as they run.
  const int64_t max_t = 2 * (config_.speculative.num_tokens + 1);
  if (ranks_) ranks_->profile(max_t, config_.kv_dtype);
  profile_forward_times(model_, max_t, config_.kv_dtype, config_.quant_simulation,
                        [&](int64_t t, double seconds) { adaptive_->cost().observe(t, seconds); });
}

}  // namespace flint::engine
