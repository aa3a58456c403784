// MTP drafting with DeepSeek-V4's mtp.0 layer (model/deepseek_v4/mtp.h). The layer's window
// KV holds a row per committed position p (from the target's final streams h_p and the next
// token x_{p+1}). Rows are computed when a draft is wanted (pending_window.h: hc x H floats
// and a token wait per position meanwhile): the positions committed since go in as one
// batched pass whose last row already predicts the first draft, and each further draft is
// one more batched pass on the previous one's output streams.
// Chained rows are speculative: the store is truncated back afterwards (its ring has room).
#include "base/check.h"
#include "base/comm.h"
#include "engine/speculative/pending_window.h"
#include "model/deepseek_v4/mtp.h"

namespace flint::engine {
namespace {

class MtpProposer final : public Proposer {
 public:
  MtpProposer(const dsv4::Model& model, const EngineConfig& config)
      : model_(model),
        draft_(dsv4::load_mtp(model)),
        config_(config),
        window_(model.config().sliding_window) {}

  std::string_view name() const override { return "mtp"; }
  bool runs_on_every_rank() const override { return true; }
  bool wants_trace() const override { return true; }
  void request_trace(dsv4::ForwardTrace& t) const override {
    t.record_layers = false;
    t.last_rows = window_;
  }
  int64_t context_window() const override { return window_; }

  void propose(std::span<ProposeItem> items, const dsv4::ForwardTrace* trace) override {
    const dsv4::Config& c = model_.config();
    const int64_t row_floats = c.hc_mult * c.hidden_size;
    const auto sim = config_.quant_simulation;
    // 1. The committed positions join the pending ones; those wanting drafts compute them.
    std::vector<dsv4::MtpInput> inputs;
    std::vector<ProposeItem*> owners;
    for (ProposeItem& it : items) {
      PendingWindowState& st = gather_pending(
          it, trace->final_streams.data(), row_floats, window_, true,
          [&] { return draft_->new_state(config_.kv_dtype, config_.speculative.num_tokens); });
      if (it.want <= 0 || st.pending() == 0) continue;
      inputs.push_back({st.kv.get(), st.tokens, st.rows.data(), true});
      owners.push_back(&it);
    }
    if (inputs.empty()) return;
    std::vector<float> streams;
    std::vector<float> logits = draft_->forward(inputs, sim, &streams);
    for (ProposeItem* it : owners)
      static_cast<PendingWindowState*>(it->state->get())->clear_pending();
    // 2. Chained drafts, batched over the sequences that still want more; each feeds the
    // layer's own output streams back as the next position's h. Rank 0 picks each pass's
    // tokens; the other ranks get them for the next pass (one broadcast per pass).
    Comm* comm = model_.comm();
    const bool picks = comm_rank(comm) == 0;
    const int64_t V = c.vocab_size;
    std::vector<int32_t> last(owners.size());
    std::vector<int64_t> drafted(owners.size(), 1);
    std::vector<std::vector<float>> h(owners.size());
    std::vector<size_t> active;
    for (size_t k = 0; k < owners.size(); ++k) {
      ProposeItem& it = *owners[k];
      std::span<float> row(logits.data() + static_cast<int64_t>(k) * V, static_cast<size_t>(V));
      if (picks) last[k] = pick_draft(row, it);
      h[k].assign(streams.begin() + static_cast<int64_t>(k) * row_floats,
                  streams.begin() + static_cast<int64_t>(k + 1) * row_floats);
      if (it.want > 1) active.push_back(k);
    }
    while (!active.empty()) {
      if (comm_size(comm) > 1) comm->broadcast(last, "MTP draft tokens");
      std::vector<dsv4::MtpInput> chain;
      for (size_t k : active)
        chain.push_back({inputs[k].state, std::span<const int32_t>(&last[k], 1), h[k].data()});
      std::vector<float> out = draft_->forward(chain, sim, &streams);
      std::vector<size_t> still;
      for (size_t j = 0; j < active.size(); ++j) {
        const size_t k = active[j];
        ProposeItem& it = *owners[k];
        std::span<float> row(out.data() + static_cast<int64_t>(j) * V, static_cast<size_t>(V));
        if (picks) last[k] = pick_draft(row, it);
        h[k].assign(streams.begin() + static_cast<int64_t>(j) * row_floats,
                    streams.begin() + static_cast<int64_t>(j + 1) * row_floats);
        if (++drafted[k] < it.want) still.push_back(k);
      }
      active = std::move(still);
    }
    for (size_t k = 0; k < owners.size(); ++k) inputs[k].state->truncate(owners[k]->to);
  }

 private:
  const dsv4::Model& model_;
  std::unique_ptr<dsv4::MtpDraft> draft_;
  EngineConfig config_;
  int64_t window_;
};

}  // namespace

namespace spec_internal {
std::unique_ptr<Proposer> make_mtp(const dsv4::Model& model, const EngineConfig& config) {
  return std::make_unique<MtpProposer>(model, config);
}
}  // namespace spec_internal

}  // namespace flint::engine
