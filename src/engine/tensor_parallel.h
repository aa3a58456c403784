// The engine across ranks (docs/parallel.md). Rank 0 runs the scheduler, the sampler, the
// draft and every decision; each step it sends the other ranks one command: the KV cache's
// journal since the last command (so their caches make the same pages hold the same
// sequences) with the speculative rollbacks in their place among the cache's calls, and the
// batch to run (sequence ids, tokens, which rows need logits and undo records). Every rank then
// runs the same forward pass on its part of the weights, joined by the model's collectives. The
// other ranks never schedule or sample; a rank that has nothing of its own to do in a step (no
// token for its experts) still joins each of that step's collectives, since every rank runs
// the whole forward call.
//
// A draft model (MTP, DSpark) runs on every rank, split like the target: after each step rank
// 0 sends the items of its propose() call (which sequences, the positions committed, how
// many drafts each wants), every rank keeps a draft state per sequence, and the draft's
// forward calls join the ranks with their collectives; rank 0 picks the tokens (Proposer).
//
// While idle, rank 0 sends a heartbeat every second, so the others tell "idle" from "lost".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/comm.h"
#include "engine/engine_config.h"
#include "engine/speculative/proposer.h"
#include "kv/kv_cache.h"
#include "model/deepseek_v4/model.h"

namespace flint::engine {

// One sequence's part of a step, as the ranks exchange it.
struct StepItem {
  kv::KvCache::SeqId seq = 0;
  std::span<const int32_t> tokens;
  bool all_logits = false;
  bool undo = false;  // speculative tokens: every rank records what a rollback needs
};

// Rank 0's end; EngineCore owns one when the model runs on more than one rank.
class StepSender {
 public:
  // Sends the KV cache's size (the other ranks build theirs from it) and the draft model the
  // others run (SpecMethod::kNone: none), and starts recording the cache's calls.
  StepSender(Comm& comm, kv::KvCache& cache, const DebugFault& fault, SpecMethod draft,
             int64_t draft_tokens);
  ~StepSender();  // tells the other ranks to drop this engine's cache
  StepSender(const StepSender&) = delete;
  StepSender& operator=(const StepSender&) = delete;

  // Before rank 0's forward call of a step.
  void forward(std::span<const StepItem> items);
  // After verification: item `item` of the last forward keeps `keep` of its tokens
  // (Model::rollback). Sent, in order with the cache's calls, with the next command.
  void rollback(size_t item, int64_t keep);
  // Before rank 0's Proposer::propose when the draft runs on every rank: the items, each
  // item's KV sequence (seqs) and the sequence whose draft state it was cloned from before
  // the call (clone_of; -1: none).
  void propose(std::span<const ProposeItem> items, std::span<const kv::KvCache::SeqId> seqs,
               std::span<const kv::KvCache::SeqId> clone_of);
  // Before adaptive verification's profiling (profile_forward_times): the others run it too.
  void profile(int64_t max_tokens, kernels::KvDtype dtype);
  // While idle (at least once a second).
  void heartbeat();

 private:
  void flush_journal();
  // A command of `kind` for this engine with the calls recorded since the last one.
  std::vector<uint8_t> message(uint8_t kind);
  Comm& comm_;
  kv::KvCache& cache_;
  DebugFault fault_;
  uint32_t engine_;  // which of rank 0's engines (each has its own cache everywhere)
  int64_t step_ = 0;
  // The calls since the last command, in order: the cache's journal and rollbacks.
  std::vector<uint8_t> ops_;
  uint64_t num_ops_ = 0;
};

// Ranks other than 0: for each engine rank 0 starts, builds its KV cache as rank 0 says and
// runs each step it sends, until rank 0 finishes (an empty command). An error in a step
// ends every rank (Comm::abort_all).
void follow_rank0(const dsv4::Model& model, const EngineConfig& config, Comm& comm,
                  const DebugFault& fault);

}  // namespace flint::engine
