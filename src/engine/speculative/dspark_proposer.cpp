// DSpark drafting with DeepSeek-V4-Flash-0731's DSpark stages (model/deepseek_v4/dspark.h).
// The committed positions' target features (the stream means of dspark_target_layer_ids,
// from each step's trace) become context rows in every stage's window when a draft is
// wanted (pending_window.h: |target layers| x H floats wait per position meanwhile), in
// one batched pass. A sequence that wants drafts then gets one non-causal block pass from
// its anchor, all sequences batched, and the Markov head picks the drafts left to right,
// the confidence head giving each its survival estimate. Block rows never enter the state,
// so a rejection leaves nothing to roll back.
#include <algorithm>

#include "base/check.h"
#include "base/comm.h"
#include "base/error.h"
#include "engine/speculative/pending_window.h"
#include "model/deepseek_v4/dspark.h"

namespace flint::engine {
namespace {

class DSparkProposer final : public Proposer {
 public:
  DSparkProposer(const dsv4::Model& model, const EngineConfig& config)
      : model_(model),
        draft_(dsv4::load_dspark(model)),
        config_(config),
        window_(model.config().sliding_window) {}

  std::string_view name() const override { return "dspark"; }
  bool runs_on_every_rank() const override { return true; }
  bool wants_trace() const override { return true; }
  void request_trace(dsv4::ForwardTrace& t) const override {
    t.record_layers = false;
    t.last_rows = window_;
    t.mean_of_layers = draft_->config().target_layer_ids;
  }
  int64_t context_window() const override { return window_; }

  void propose(std::span<ProposeItem> items, const dsv4::ForwardTrace* trace) override {
    const dsv4::Config& c = model_.config();
    const int64_t feat =
        static_cast<int64_t>(draft_->config().target_layer_ids.size()) * c.hidden_size;
    const auto sim = config_.quant_simulation;
    std::vector<dsv4::DSparkContextInput> context;
    for (ProposeItem& it : items) {
      PendingWindowState& st = gather_pending(it, trace->layer_means.data(), feat, window_, false,
                                              [&] { return draft_->new_state(config_.kv_dtype); });
      if (it.want > 0 && st.pending() > 0)
        context.push_back({st.kv.get(), st.rows.data(), st.pending()});
    }
    if (!context.empty()) draft_->add_context(context, sim);
    for (ProposeItem& it : items) {
      if (it.want > 0) static_cast<PendingWindowState*>(it.state->get())->clear_pending();
    }

    std::vector<dsv4::DSparkBlockInput> blocks;
    std::vector<ProposeItem*> owners;
    for (ProposeItem& it : items) {
      if (it.want <= 0) continue;
      FLINT_CHECK(it.tokens_from + static_cast<int64_t>(it.tokens.size()) == it.to + 1);
      const int64_t n = std::min<int64_t>(it.want, draft_->config().block_size);
      blocks.push_back(
          {static_cast<PendingWindowState*>(it.state->get())->kv.get(), it.tokens.back(), n});
      owners.push_back(&it);
    }
    if (blocks.empty()) return;
    dsv4::DSparkBlockOutput out = draft_->block(blocks, sim);
    // The Markov and confidence heads pick the tokens: rank 0's part alone (no collective;
    // the drafts reach the other ranks in the next step's tokens).
    if (comm_rank(model_.comm()) != 0) return;
    const int64_t V = c.vocab_size, H = c.hidden_size;
    int64_t row = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      int32_t prev = blocks[i].anchor;
      for (int64_t k = 0; k < blocks[i].n; ++k, ++row) {
        std::span<float> z(out.logits.data() + row * V, static_cast<size_t>(V));
        draft_->add_markov(prev, z.data());
        const float conf = draft_->confidence(out.hidden.data() + row * H, prev);
        prev = pick_draft(z, *owners[i], conf);
      }
    }
  }

 private:
  const dsv4::Model& model_;
  std::unique_ptr<dsv4::DSparkDraft> draft_;
  EngineConfig config_;
  int64_t window_;
};

}  // namespace

namespace spec_internal {
std::unique_ptr<Proposer> make_dspark(const dsv4::Model& model, const EngineConfig& config) {
  const auto& d = model.config().dspark;
  if (d && config.speculative.num_tokens > d->block_size) {
    throw Error(
        "--speculative-config.num_speculative_tokens {}: this DSpark draft drafts at most "
        "dspark_block_size = {} tokens per step (config.json)",
        config.speculative.num_tokens, d->block_size);
  }
  return std::make_unique<DSparkProposer>(model, config);
}
}  // namespace spec_internal

}  // namespace flint::engine
