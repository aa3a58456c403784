// DeepSeek-V4's MTP layer mtp.0 as a draft model. For a position p whose target hidden
// streams h_p and next token x_{p+1} are known, the layer runs one DeepSeek-V4 block on
// e_proj(enorm(embed(x_{p+1}))) + h_proj(hnorm(h_p)) (per hc stream) and predicts x_{p+2}
// through its own hc_head and norm and the target's head. Chaining feeds the layer's own
// output streams back as h for the next position (as vLLM chains DeepSeek's MTP).
//
// The layer has its own sliding-window KV store (a SequenceState of one layer); the
// engine keeps one per sequence. Window-only layers (compress ratio 0) only: checked at
// load.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/deepseek_v4/model.h"

namespace flint::dsv4 {

struct MtpInput {
  SequenceKv* state = nullptr;      // the layer's store; rows go at state->length() ...
  std::span<const int32_t> tokens;  // x_{p+1} for each position p
  const float* hidden = nullptr;    // [tokens.size(), hc, H]: h_p
  bool logits = true;               // the last row's logits and streams are wanted
};

class MtpDraft {
 public:
  // `params` from load_component(..., Component::kMtp) on the target's checkpoint.
  MtpDraft(const Model& target, std::shared_ptr<const LoadedParams> params);

  // A store for one sequence; `extra_window` positions may be written speculatively
  // (chained drafts) and rolled back with truncate() without harming the window.
  std::unique_ptr<SequenceState> new_state(kernels::KvDtype dtype, int64_t extra_window) const;

  // Runs every input's rows and advances its store. Returns the logits of the last row of
  // each input that wants them [wanting, vocab] (the head is the costly part of one row);
  // `last_streams` (optional) gets those rows' output streams [wanting, hc, H], the h of
  // the next chained position.
  std::vector<float> forward(std::span<const MtpInput> batch, QuantSimulation sim,
                             std::vector<float>* last_streams) const;

 private:
  const Model& target_;
  std::shared_ptr<const LoadedParams> params_;
  ShardBuffers buffers_;  // this rank's copies of column slices (several ranks)
  MtpWeights weights_;
  LayerRope rope_;
  int64_t layer_id_;
};

// Loads mtp.0 from the target's checkpoint (no second mapping). Throws flint::Error if the
// checkpoint has no MTP layer or it does not fit.
std::unique_ptr<MtpDraft> load_mtp(const Model& target, const LoadOptions& options = {});

}  // namespace flint::dsv4
