// The engine core: one step = schedule -> execute -> update, with plain structs between.
//   schedule: the scheduler says how many tokens each sequence computes (scheduler.h);
//   execute:  one Model::forward over all of them (the model sees KV stores, not requests);
//   update:   commit the KV, sample where a sequence reached its last token, check the
//             stop conditions, emit events, free what finished.
// Single-threaded and synchronous: tests drive it step by step; Engine (engine.h) runs it
// on its own thread for the CLI and the server.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/speculative/adaptive.h"
#include "engine/speculative/proposer.h"
#include "engine/tensor_parallel.h"
#include "kv/kv_cache.h"
#include "model/deepseek_v4/model.h"

namespace flint::engine {

struct EngineStats {
  int64_t running = 0, waiting = 0;
  int64_t kv_pages_total = 0, kv_pages_used = 0, kv_pages_free = 0, kv_pages_cached = 0;
  int64_t prefix_queries = 0, prefix_hits = 0;  // in tokens, as vLLM counts them
  int64_t steps = 0, step_tokens = 0;           // steps run; tokens computed in all of them
  int64_t last_step_tokens = 0;
  int64_t preemptions = 0;
  int64_t generated_tokens = 0;
  // Speculative decoding: drafts verified, draft tokens verified and accepted, and per
  // draft position (0 = the first draft token) how often it was verified and accepted.
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  std::vector<int64_t> spec_verified_at, spec_accepted_at;
  int64_t spec_proposed_tokens = 0;  // drafted, including those adaptive verification trimmed
  double draft_seconds = 0;          // in the proposer (drafting and its context)
  double step_seconds = 0, forward_seconds = 0;  // summed over steps
  kv::KvCacheStats kv;
};

struct RequestState {
  EngineRequest request;
  std::vector<std::unique_ptr<Sequence>> samples;
  int64_t finished = 0;
  bool forked = false;
  std::chrono::steady_clock::time_point added;  // when add() took it
  double queue_seconds = -1;                     // until its first step; -1 before
};

class EngineCore {
 public:
  // Sizes the KV pool (config.kv_cache_pages, or kv_cache_bytes / page size) and logs what
  // it holds. Throws flint::Error if it cannot hold one sequence of max_model_len tokens.
  EngineCore(const dsv4::Model& model, EngineConfig config);

  const EngineConfig& config() const { return config_; }
  const kv::KvLayout& kv_layout() const { return cache_.layout(); }

  // Throws flint::Error naming the field for a request the engine cannot run; thread-safe
  // (reads only the configuration).
  void validate(const EngineRequest& request) const;
  // Validates, then queues. Throws flint::Error (nothing is taken) for an invalid request
  // or a request id that is live already.
  void add(EngineRequest request);
  // Frees the request's KV now, wherever it is. Returns its final event (kAbort), or
  // nothing if the id is unknown (finished or never added).
  std::optional<RequestOutput> abort(const std::string& id);

  bool has_work() const { return !scheduler_.running().empty() || !scheduler_.waiting().empty(); }
  // Called by the engine thread while idle (about once a second): with the model on several
  // ranks, tells the others that rank 0 lives.
  void idle();
  std::vector<RequestOutput> step();
  EngineStats stats() const;

 private:
  void update(const SchedulerOutput& out, std::vector<float>& logits,
              std::vector<dsv4::KvUndo>& undos, const dsv4::ForwardTrace* trace,
              std::vector<RequestOutput>& events);
  // Verifies a sequence's drafts against its logits rows (k + 1 of them) and records the
  // tokens; returns how many drafts were accepted.
  int64_t verify(Sequence& seq, std::span<float> rows, int64_t k, DraftRecord* log);
  // After sampling: extends the drafts' context and asks for the next drafts.
  void propose(const SchedulerOutput& out, const std::vector<int64_t>& from,
               const std::vector<std::pair<Sequence*, size_t>>& forked,
               const dsv4::ForwardTrace* trace);
  int64_t drafts_wanted(const Sequence& seq) const;
  void choose_drafts();   // adaptive verification, before scheduling
  void profile_steps();   // seeds adaptive verification's cost table
  void fork_samples(RequestState& r, Sequence& parent);
  // Takes a sampled token: the sampler's state, stop conditions, the token's event.
  // (does not emit: the step's tokens of a sequence go out as one event).
  void record(Sequence& seq, SampleResult res, bool sampler_accepted = false);
  void finish(Sequence& seq, FinishReason reason, std::vector<RequestOutput>& events);
  void emit(Sequence& seq, FinishReason reason, std::vector<RequestOutput>& events);
  std::unique_ptr<Sequence> new_sequence(RequestState& r, int32_t sample);

  const dsv4::Model& model_;
  EngineConfig config_;
  kv::KvCache cache_;
  Scheduler scheduler_;
  std::unordered_map<std::string, std::unique_ptr<RequestState>> requests_;
  EngineStats stats_;
  std::vector<float> row_, raw_row_;  // scratch logits rows for forked samples
  std::unique_ptr<Proposer> proposer_;  // null without speculative decoding
  std::unique_ptr<AdaptiveVerifier> adaptive_;
  std::unique_ptr<StepSender> ranks_;  // the model runs on several ranks (rank 0 here)
  std::unordered_map<const Sequence*, std::vector<DraftRecord>> draft_log_;  // record_drafts
};

// One line on speculative decoding: acceptance overall and per draft position, mean
// accepted length, drafting time.
std::string describe_speculation(const EngineStats& s);

// Adaptive verification's cost table: times forward calls of 1 .. max_tokens tokens on a
// private sequence (medians of three) and hands each to `observe` (may be null: the other
// ranks of a split model make the same calls without timing them).
void profile_forward_times(const dsv4::Model& model, int64_t max_tokens, kernels::KvDtype dtype,
                           QuantSimulation sim,
                           const std::function<void(int64_t, double)>& observe);

// The pool size in pages for `config` (kv_cache_pages, or kv_cache_bytes / page bytes).
int64_t kv_pool_pages(const dsv4::Config& model, const EngineConfig& config);

}  // namespace flint::engine
