// n-gram drafting (prompt lookup, vLLM's "ngram"): the longest suffix of the sequence, of
// prompt_lookup_max down to prompt_lookup_min tokens, that occurred before; the tokens that
// followed its most recent earlier occurrence are the drafts. No weights, no state; the
// drafts are deterministic (q one-hot), so verification treats them as greedy drafts.
// Cost: O(context x n) comparisons per sequence per step, trivial beside a forward pass.
#include <algorithm>

#include "engine/speculative/proposer.h"

namespace flint::engine {
namespace {

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int64_t min_n, int64_t max_n) : min_n_(min_n), max_n_(max_n) {}
  std::string_view name() const override { return "ngram"; }

  void propose(std::span<ProposeItem> items, const dsv4::ForwardTrace*) override {
    for (ProposeItem& item : items) {
      if (item.want <= 0) continue;
      const auto& t = item.tokens;
      const int64_t len = static_cast<int64_t>(t.size());
      for (int64_t n = std::min(max_n_, len - 1); n >= min_n_; --n) {
        const auto suffix = t.subspan(static_cast<size_t>(len - n));
        // Most recent earlier occurrence that has at least one token after it.
        for (int64_t i = len - n - 1; i >= 0; --i) {
          if (!std::equal(suffix.begin(), suffix.end(), t.begin() + i)) continue;
          const int64_t from = i + n, count = std::min(item.want, len - from);
          for (int64_t k = 0; k < count; ++k) {
            item.out->tokens.push_back(t[static_cast<size_t>(from + k)]);
            item.out->confidence.push_back(1.0f);  // unknown: adaptive uses measured rates
          }
          break;
        }
        if (!item.out->tokens.empty()) break;
      }
    }
  }

 private:
  int64_t min_n_, max_n_;
};

}  // namespace

namespace spec_internal {
std::unique_ptr<Proposer> make_ngram(const EngineConfig& config) {
  const SpeculativeConfig& s = config.speculative;
  const int64_t max_n = s.prompt_lookup_max > 0 ? s.prompt_lookup_max : 5;
  const int64_t min_n = s.prompt_lookup_min > 0 ? s.prompt_lookup_min : max_n;
  return std::make_unique<NgramProposer>(std::max<int64_t>(1, min_n), std::max(min_n, max_n));
}
}  // namespace spec_internal

}  // namespace flint::engine
