// The scheduler (vLLM v1 semantics): each step it decides how many tokens each sequence
// computes. There are no prefill and decode modes: a sequence needs its uncomputed tokens
// (a whole prompt, a chunk of one, or the one token sampled last step), and a step
// carries as many as the token budget allows:
//   1. running sequences that decode (one token each), in admission order, so a long
//      prompt never starves them;
//   2. running sequences still in their prompt, a chunk each (whole prompts only without
//      chunked prefill);
//   3. waiting sequences, first come first served, while seats (max_num_seqs), budget
//      and KV pages last; each first takes back its cached prefix.
// When the KV pool cannot hold a running sequence's next tokens, the most recently
// admitted running sequence is preempted (its pages released, recomputed later; it goes
// back to the front of the queue). No new sequence is admitted in a step that preempted.
// A decoding sequence's drafts ride along with its token while budget and pages allow
// (they are dropped, never the sequence, when they do not fit).
//
// Works on pages and token counts only (kv::KvCache); never sees a tensor.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/engine_config.h"
#include "engine/sequence.h"
#include "kv/kv_cache.h"

namespace flint::engine {

struct ScheduledSeq {
  Sequence* seq = nullptr;
  // tokens [num_computed, num_computed + num_tokens): the sequence's uncomputed tokens,
  // then its first num_drafts drafts (speculative decoding), verified by this step
  int64_t num_tokens = 0;
  int64_t num_drafts = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> scheduled;
  int64_t num_tokens = 0;
  std::vector<Sequence*> preempted;
};

class Scheduler {
 public:
  Scheduler(const EngineConfig& config, kv::KvCache& cache);

  void add(Sequence* seq);  // to the back of the waiting queue
  // A sequence that already holds its KV (a forked sample) joins the running batch.
  void add_running(Sequence* seq);
  // Removes a sequence wherever it is and releases its KV.
  void remove(Sequence* seq);
  SchedulerOutput schedule();
  // A restored prefix leaves at least this many tokens to compute (a draft reads the
  // target's hidden states of the last ones).
  void set_min_uncomputed(int64_t n) { min_uncomputed_ = n; }

  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  int64_t num_preemptions() const { return preemptions_; }

 private:
  void preempt(Sequence* seq);
  void release_kv(Sequence* seq);

  const EngineConfig& config_;
  kv::KvCache& cache_;
  std::vector<Sequence*> running_;  // in admission order
  std::deque<Sequence*> waiting_;
  int64_t admissions_ = 0;
  int64_t preemptions_ = 0;
  int64_t min_uncomputed_ = 1;
};

}  // namespace flint::engine
