// Speculative decoding's draft side: a Proposer turns each sequence's context into draft
// tokens that the next step verifies (engine_core.cpp, Sampler::verify). One file per
// method (ngram_proposer.cpp, mtp_proposer.cpp, dspark_proposer.cpp, oracle_proposer.cpp)
// plus its line in make_proposer().
//
// Each step, after sampling, the engine hands every scheduled sequence to propose(): the
// positions its target forward committed this step (the draft's context grows by them,
// with the target's hidden rows from the step's trace) and, when the sequence has a new
// token to continue from (the anchor, tokens.back()), how many drafts it wants.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/rng.h"
#include "engine/engine_config.h"
#include "engine/sampler.h"
#include "engine/speculative/draft_state.h"
#include "model/deepseek_v4/model.h"

namespace flint::engine {

// Draft tokens for one sequence, verified in order by the next step.
struct Draft {
  std::vector<int32_t> tokens;
  // Per token, the draft's own estimate that it is accepted given the earlier ones (the
  // DSpark confidence head; otherwise the draft's probability of the token): adaptive
  // verification's input.
  std::vector<float> confidence;
  // Per token, the distribution it was drawn from (probabilistic drafts); empty for greedy
  // drafts (q one-hot).
  std::vector<std::vector<float>> q;
  void clear() {
    tokens.clear();
    confidence.clear();
    q.clear();
  }
};

struct ProposeItem {
  // The sequence's tokens from position tokens_from on (0 on rank 0; other ranks get only
  // the positions the draft reads, from + 1 .. to); the anchor last when drafting.
  std::span<const int32_t> tokens;
  int64_t tokens_from = 0;
  int64_t from = 0, to = 0;  // positions the target committed this step
  // Positions [trace_from, to) have hidden rows in the step's trace, from trace_row on
  // (the trace keeps each sequence's last rows only: earlier ones leave the window).
  int64_t trace_from = 0, trace_row = 0;
  std::unique_ptr<DraftState>* state = nullptr;
  int64_t want = 0;  // drafts wanted now (0: only extend the context)
  // Rank 0 only (it picks every draft token; the others get them from it):
  Sampler* sampler = nullptr;       // the sequence's settings (greedy drafts follow them)
  bool probabilistic = false;       // draw drafts from the draft's distribution
  Rng* rng = nullptr;               // the sequence's draft generator
  std::span<const int32_t> oracle;  // kOracle: the continuation to draft from
  Draft* out = nullptr;             // filled when want > 0
};

// Drafts that run a model (MTP, DSpark) run on every rank when the target is split over
// ranks, their blocks split like the target's: rank 0 sends the other ranks the items of
// each propose() call (tensor_parallel.h), every rank runs the same draft forward calls
// with their collectives, and rank 0 alone picks the tokens, broadcasting those the next
// draft pass reads (MTP's chain). Methods without a model (n-gram, oracle) run on rank 0.
class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string_view name() const = 0;
  // Whether the other ranks run this proposer too (a draft model split over ranks).
  virtual bool runs_on_every_rank() const { return false; }
  // What the target's forward must record for this draft (nothing by default).
  virtual bool wants_trace() const { return false; }
  virtual void request_trace(dsv4::ForwardTrace&) const {}
  // Trailing tokens whose target hidden states the draft reads: a restored prefix must
  // leave that many computed afresh (KvCache::restore_prefix).
  virtual int64_t context_window() const { return 1; }
  virtual void propose(std::span<ProposeItem> items, const dsv4::ForwardTrace* trace) = 0;
};

// The configured method's proposer; loads draft weights from the target's checkpoint.
// Throws flint::Error (naming what is missing) if the checkpoint cannot serve the method.
std::unique_ptr<Proposer> make_proposer(const dsv4::Model& model, const EngineConfig& config);

// Picks one draft token from draft logits (scratch) and records it in item.out: argmax
// through the sequence's settings, or drawn from them with item.rng (probabilistic).
int32_t pick_draft(std::span<float> logits, const ProposeItem& item, float confidence = -1.0f);

namespace spec_internal {
std::unique_ptr<Proposer> make_ngram(const EngineConfig& config);
std::unique_ptr<Proposer> make_mtp(const dsv4::Model& model, const EngineConfig& config);
std::unique_ptr<Proposer> make_dspark(const dsv4::Model& model, const EngineConfig& config);
std::unique_ptr<Proposer> make_oracle(const dsv4::Model& model, const EngineConfig& config);
}  // namespace spec_internal

}  // namespace flint::engine
