// DeepSeek-V4-Flash-0731's DSpark draft (stages mtp.0..N-1), as DeepSeek's DeepSpec defines
// it and llama.cpp v0.5.0 runs it (docs/speculative.md says where sources differ):
//   context: for every computed position c, the target's output streams of the layers
//     dspark_target_layer_ids, averaged over the hc streams and concatenated, give
//     main_x_c = main_norm(main_proj(features_c)); each stage stores
//     kv_norm(wkv(main_x_c)) with RoPE at c as a window KV row (K = V, as any row).
//   block: [anchor, noise x (n - 1)] at positions P .. P + n - 1 (P: the anchor's) through
//     the stages as ordinary blocks, except that attention inside the block is
//     non-causal and sees the stage's context rows of positions >= p - window + 1 and
//     < P; block rows are never stored. Then hc_head, norm and the target's head give
//     base logits U_k, and h_k (hc_head's output) feeds the confidence head.
//   Markov head, left to right: z_k = U_k + markov_w2 . markov_w1[prev_k], prev_0 the
//     anchor, then the token drafted at k - 1; confidence c_k = sigmoid(proj .
//     [h_k ; markov_w1[prev_k]]).
// The engine keeps one store (stages x window rows) per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/deepseek_v4/model.h"

namespace flint::dsv4 {

struct DSparkContextInput {
  SequenceKv* state = nullptr;      // rows go at state->length() ...
  const float* features = nullptr;  // [n, targets * H]: ForwardTrace::layer_means rows
  int64_t n = 0;
};

struct DSparkBlockInput {
  SequenceKv* state = nullptr;  // the anchor sits at position state->length()
  int32_t anchor = 0;
  int64_t n = 0;  // block length = draft tokens wanted, 1 .. dspark_block_size
};

struct DSparkBlockOutput {
  std::vector<float> logits;  // [rows, vocab]: U_k of every block row, inputs in order
  std::vector<float> hidden;  // [rows, H]: h_k
};

class DSparkDraft {
 public:
  // `params` from load_component(..., Component::kDSpark) on the target's checkpoint.
  DSparkDraft(const Model& target, std::shared_ptr<const LoadedParams> params);

  const DSparkConfig& config() const { return *target_.config().dspark; }
  std::unique_ptr<SequenceState> new_state(kernels::KvDtype dtype) const;

  // Writes each input's context rows into every stage and advances its store.
  void add_context(std::span<const DSparkContextInput> batch, QuantSimulation sim) const;
  // One non-causal pass over each input's block; stores are read, not changed.
  DSparkBlockOutput block(std::span<const DSparkBlockInput> batch, QuantSimulation sim) const;
  // z += markov_w2 . markov_w1[prev] ([vocab]).
  void add_markov(int32_t prev, float* z) const;
  // sigmoid(proj . [h ; markov_w1[prev]]), h: [H].
  float confidence(const float* h, int32_t prev) const;

 private:
  const Model& target_;
  std::shared_ptr<const LoadedParams> params_;
  ShardBuffers buffers_;  // this rank's copies of column slices (several ranks)
  DSparkWeights weights_;
  std::vector<LayerRope> ropes_;  // per stage
};

// Loads the DSpark stages from the target's checkpoint (no second mapping). Throws
// flint::Error if the checkpoint has none or they do not fit.
std::unique_ptr<DSparkDraft> load_dspark(const Model& target, const LoadOptions& options = {});

}  // namespace flint::dsv4
