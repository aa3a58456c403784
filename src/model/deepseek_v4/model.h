// The DeepSeek-V4 target model: embedding into hc streams, the decoder blocks, hc_head,
// norm and head. Batch-first: one forward call runs a chunk of tokens for each of several
// sequences (prompts, chunked prefill, decode steps and draft verification alike); the
// per-sequence state (state.h) carries everything between calls.
//
// Thread-safety: forward() is const and may run concurrently only on disjoint states;
// the engine calls it from one thread and kernels use the thread pool inside.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "formats/checkpoint.h"
#include "formats/loader.h"
#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/params.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

struct ForwardRequest {
  SequenceKv* state = nullptr;
  std::span<const int32_t> tokens;  // appended at positions state->length() ...
  bool all_logits = false;          // logits for every token, or for the last one only
};

// Hidden states a forward call can record besides the logits: for debugging dumps and for
// drafts that read the target's streams (DSpark). Rows are the batch's rows in order.
struct ForwardTrace {
  std::vector<std::vector<float>> streams_in;  // per layer: its input streams [rows, hc, H]
  std::vector<float> final_streams;            // [rows, hc, H] after the last layer
};

class Model {
 public:
  // `params` must come from load_component(..., Component::kTarget) with the same config.
  Model(Config config, std::shared_ptr<const LoadedParams> params);

  const Config& config() const { return config_; }
  // A fingerprint of the weights: config.json and samples of the embedding, head and final
  // norm. Caches that outlive the process (the KV disk tier) refuse entries of another.
  uint64_t identity() const { return identity_; }
  // A contiguous store for one sequence (the engine uses paged stores instead).
  SequenceState new_sequence(kernels::KvDtype dtype = kernels::KvDtype::kF32) const {
    return SequenceState(config_, dtype);
  }

  // Runs every request's tokens and advances its state. Returns the logits rows
  // [rows, vocab]: for each request in order, all its tokens or its last one.
  // Throws flint::Error for token ids outside the vocabulary (nothing is changed then).
  // With `trace`, also records the hidden streams (costs one copy of them per layer).
  std::vector<float> forward(std::span<const ForwardRequest> batch, QuantSimulation sim,
                             ForwardTrace* trace = nullptr) const;

 private:
  Config config_;
  std::shared_ptr<const LoadedParams> params_;
  TargetWeights weights_;
  std::vector<LayerRope> ropes_;  // per layer
  uint64_t identity_ = 0;
};

// A loaded component: its parameters (views into the checkpoint) and the load report.
struct LoadedComponent {
  std::shared_ptr<const LoadedParams> params;
  LoadReport report;
};

// Matches `checkpoint` against `component`'s declaration. Does not throw for checkpoint
// problems (they are in the report; see check_load_report).
LoadedComponent load_component(const std::shared_ptr<const Checkpoint>& checkpoint,
                               const Config& config, Component component,
                               const LoadOptions& options);

// Opens the checkpoint at `dir`, loads the target strictly and builds the model. Throws
// flint::Error listing every problem if the checkpoint does not fit.
std::unique_ptr<Model> load_model(const std::filesystem::path& dir,
                                  const LoadOptions& options = {});

}  // namespace flint::dsv4
