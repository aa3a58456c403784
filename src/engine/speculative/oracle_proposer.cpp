// The oracle (a debug method for speed-up curves, not for serving): drafts the tokens a
// plain run produced (EngineRequest::oracle_tokens), each replaced by a wrong one with
// probability 1 - oracle_accept, so greedy verification accepts a geometric number of them.
// Drafting costs nothing, which isolates what verification gains at a given acceptance.
#include "engine/speculative/proposer.h"

namespace flint::engine {
namespace {

class OracleProposer final : public Proposer {
 public:
  OracleProposer(int64_t vocab, double accept) : vocab_(vocab), accept_(accept) {}
  std::string_view name() const override { return "oracle"; }

  void propose(std::span<ProposeItem> items, const dsv4::ForwardTrace*) override {
    for (ProposeItem& it : items) {
      for (int64_t k = 1; k <= it.want; ++k) {
        const int64_t at = it.to + k;  // the position the k-th draft is for
        if (at >= static_cast<int64_t>(it.oracle.size())) break;
        int32_t t = it.oracle[static_cast<size_t>(at)];
        if (it.rng->uniform() >= accept_) t = static_cast<int32_t>((t + 1) % vocab_);
        it.out->tokens.push_back(t);
        it.out->confidence.push_back(static_cast<float>(accept_));
      }
    }
  }

 private:
  int64_t vocab_;
  double accept_;
};

}  // namespace

namespace spec_internal {
std::unique_ptr<Proposer> make_oracle(const dsv4::Model& model, const EngineConfig& config) {
  return std::make_unique<OracleProposer>(model.config().vocab_size,
                                          config.speculative.oracle_accept);
}
}  // namespace spec_internal

}  // namespace flint::engine
