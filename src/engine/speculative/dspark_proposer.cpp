// DSpark drafting with DeepSeek-V4-Flash-0731's DSpark stages (model/deepseek_v4/dspark.h).
// The committed positions' target features (the stream means of dspark_target_layer_ids,
// from each step's trace) become context rows in every stage's window when a draft is
// wanted: until then they wait as pending features (at most the last sliding_window
// positions, |target layers| x H floats each), so a sequence that does not draft (adaptive
// verification paused it, or it is in its prompt) costs a copy, and a later draft computes
// its whole context in one batched pass. A sequence that wants drafts then gets one
// non-causal block pass from its anchor, all sequences batched, and the Markov head picks
// the drafts left to right, the confidence head giving each its survival estimate. Block
// rows never enter the state, so a rejection leaves nothing to roll back.
#include <algorithm>

#include "base/check.h"
#include "base/error.h"
#include "engine/speculative/proposer.h"
#include "model/deepseek_v4/dspark.h"

namespace flint::engine {
namespace {

struct DSparkState final : DraftState {
  std::unique_ptr<dsv4::SequenceState> kv;
  // Features of positions kv->length() .. + pending(), whose context rows are not computed yet.
  std::vector<float> pending;
  int64_t feat = 0;  // floats per position
  int64_t num_pending() const { return feat ? static_cast<int64_t>(pending.size()) / feat : 0; }
  std::unique_ptr<DraftState> clone() const override {
    auto c = std::make_unique<DSparkState>();
    c->kv = std::make_unique<dsv4::SequenceState>(*kv);
    c->pending = pending;
    c->feat = feat;
    return c;
  }
  int64_t length() const override { return kv->length() + num_pending(); }
  // Forgets the oldest pending positions (never read again: beyond the window).
  void drop(int64_t n) {
    n = std::min(n, num_pending());
    if (n <= 0) return;
    kv->advance(n);
    pending.erase(pending.begin(), pending.begin() + n * feat);
  }
};

class DSparkProposer final : public Proposer {
 public:
  DSparkProposer(const dsv4::Model& model, const EngineConfig& config)
      : model_(model),
        draft_(dsv4::load_dspark(model)),
        config_(config),
        window_(model.config().sliding_window) {}

  std::string_view name() const override { return "dspark"; }
  bool wants_trace() const override { return true; }
  void request_trace(dsv4::ForwardTrace& t) const override {
    t.record_layers = false;
    t.last_rows = window_;
    t.mean_of_layers = draft_->config().target_layer_ids;
  }
  int64_t context_window() const override { return window_; }

  void propose(std::span<ProposeItem> items, const dsv4::ForwardTrace* trace) override {
    const dsv4::Config& c = model_.config();
    const int64_t feat = static_cast<int64_t>(draft_->config().target_layer_ids.size()) *
                         c.hidden_size;
    const auto sim = config_.quant_simulation;
    std::vector<dsv4::DSparkContextInput> context;
    for (ProposeItem& it : items) {
      DSparkState* st = state_of(it, feat);
      const int64_t first = std::max(it.trace_from, it.to - window_);
      if (first > it.from) {  // positions without features: older pending ones are out of reach
        st->drop(st->num_pending());
        st->kv->advance(first - it.from);  // rows never read
      }
      if (first < it.to) {
        const float* f = trace->layer_means.data() + (it.trace_row + first - it.trace_from) * feat;
        st->pending.insert(st->pending.end(), f, f + (it.to - first) * feat);
      }
      st->drop(st->num_pending() - window_);
      if (it.want <= 0 || st->num_pending() == 0) continue;
      context.push_back({st->kv.get(), st->pending.data(), st->num_pending()});
    }
    if (!context.empty()) draft_->add_context(context, sim);
    for (ProposeItem& it : items) {
      if (it.want > 0) static_cast<DSparkState*>(it.state->get())->pending.clear();
    }

    std::vector<dsv4::DSparkBlockInput> blocks;
    std::vector<ProposeItem*> owners;
    for (ProposeItem& it : items) {
      if (it.want <= 0) continue;
      FLINT_CHECK(static_cast<int64_t>(it.tokens.size()) == it.to + 1);
      const int64_t n = std::min<int64_t>(it.want, draft_->config().block_size);
      blocks.push_back({static_cast<DSparkState*>(it.state->get())->kv.get(), it.tokens.back(), n});
      owners.push_back(&it);
    }
    if (blocks.empty()) return;
    dsv4::DSparkBlockOutput out = draft_->block(blocks, sim);
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
  DSparkState* state_of(ProposeItem& it, int64_t feat) {
    auto* st = static_cast<DSparkState*>(it.state->get());
    if (st == nullptr || st->length() != it.from) {
      auto fresh = std::make_unique<DSparkState>();
      fresh->feat = feat;
      fresh->kv = draft_->new_state(config_.kv_dtype);
      fresh->kv->advance(it.from);
      st = fresh.get();
      *it.state = std::move(fresh);
    }
    return st;
  }

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
