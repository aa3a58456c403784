#include "engine/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace flint::engine {

Scheduler::Scheduler(const EngineConfig& config, kv::KvCache& cache)
    : config_(config), cache_(cache) {}

void Scheduler::add(Sequence* seq) { waiting_.push_back(seq); }

void Scheduler::add_running(Sequence* seq) {
  FLINT_CHECK(seq->kv.has_value());
  seq->admitted = admissions_++;
  running_.push_back(seq);
}

void Scheduler::release_kv(Sequence* seq) {
  if (seq->kv) cache_.close(*seq->kv);
  seq->kv.reset();
  seq->num_computed = 0;
  seq->draft.clear();  // the draft's state restarts with the recomputation
  seq->draft_state.reset();
}

void Scheduler::remove(Sequence* seq) {
  release_kv(seq);
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  seq->admitted = -1;
}

void Scheduler::preempt(Sequence* seq) {
  release_kv(seq);
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  seq->admitted = -1;
  waiting_.push_front(seq);
  ++preemptions_;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_num_batched_tokens;

  // Running sequences: decodes first, then prompt chunks, each group in admission order.
  std::vector<Sequence*> order = running_;
  std::stable_partition(order.begin(), order.end(),
                        [](const Sequence* s) { return s->uncomputed() == 1; });
  for (Sequence* seq : order) {
    if (budget == 0) break;
    if (seq->admitted < 0) continue;  // preempted earlier in this step
    const int64_t need = seq->uncomputed();
    FLINT_CHECK(need > 0, "a running sequence with nothing to compute");
    const int64_t n_tok = std::min(need, budget);
    if (n_tok < need && !config_.enable_chunked_prefill) continue;
    int64_t drafts = need == 1 ? std::min(static_cast<int64_t>(seq->draft.tokens.size()),
                                          budget - n_tok)
                               : 0;
    if (drafts > 0 && !cache_.reserve(*seq->kv, n_tok + drafts)) drafts = 0;
    const int64_t n = n_tok + drafts;
    bool fits = cache_.reserve(*seq->kv, n);
    while (!fits) {
      // Preempt the most recently admitted other sequence, or this one if it is the last.
      Sequence* victim = running_.back();
      if (victim == seq) break;
      auto it = std::find_if(out.scheduled.begin(), out.scheduled.end(),
                             [victim](const ScheduledSeq& s) { return s.seq == victim; });
      if (it != out.scheduled.end()) {
        budget += it->num_tokens;
        out.num_tokens -= it->num_tokens;
        out.scheduled.erase(it);
      }
      preempt(victim);
      out.preempted.push_back(victim);
      fits = cache_.reserve(*seq->kv, n);
    }
    if (!fits) {
      preempt(seq);
      out.preempted.push_back(seq);
      continue;
    }
    out.scheduled.push_back({seq, n, drafts});
    out.num_tokens += n;
    budget -= n;
  }

  // Waiting sequences, first come first served.
  while (out.preempted.empty() && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    if (!seq->kv) {
      seq->kv = cache_.open(seq->cache_salt);
      seq->num_computed = cache_.restore_prefix(*seq->kv, seq->tokens, min_uncomputed_);
    }
    const int64_t need = seq->uncomputed();
    const int64_t n = std::min(need, budget);
    if (n < need && !config_.enable_chunked_prefill) break;
    if (!cache_.reserve(*seq->kv, n)) {
      release_kv(seq);  // its cached prefix stays findable for the next attempt
      break;
    }
    waiting_.pop_front();
    if (seq->cached_prompt < 0) seq->cached_prompt = std::min(seq->num_computed, seq->prompt_len);
    seq->admitted = admissions_++;
    running_.push_back(seq);
    out.scheduled.push_back({seq, n, 0});
    out.num_tokens += n;
    budget -= n;
  }
  return out;
}

}  // namespace flint::engine
