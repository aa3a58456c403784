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
#include "model/deepseek_v4/shard.h"
#include "model/deepseek_v4/state.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

// Everything rolling a sequence back after speculative tokens needs (Model::rollback).
struct KvUndo {
  int64_t length0 = 0;  // the state's length before the tokens
  int64_t n = 0;        // tokens fed
  std::vector<LayerUndo> layers;
};

struct ForwardRequest {
  SequenceKv* state = nullptr;
  std::span<const int32_t> tokens;  // appended at positions state->length() ...
  bool all_logits = false;          // logits for every token, or for the last one only
  KvUndo* undo = nullptr;           // speculative tokens: record what a rollback needs
};

// Hidden states a forward call can record besides the logits: for debugging dumps and for
// drafts that read the target's streams (MTP, DSpark). Rows are the batch's rows in order.
struct ForwardTrace {
  bool record_layers = true;  // streams_in of every layer, all rows (one copy per layer)
  // Layers whose output streams are recorded averaged over the hc streams (DSpark's
  // target features), in this order.
  std::vector<int64_t> mean_of_layers;
  // layer_means and final_streams keep only each request's last `last_rows` tokens (0: all):
  // drafts read the hidden states of the last sliding_window positions only.
  int64_t last_rows = 0;

  std::vector<std::vector<float>> streams_in;  // per layer: its input streams [rows, hc, H]
  // Captured rows: per request, the index (into its tokens) of its first captured token,
  // and that token's row in layer_means and final_streams.
  std::vector<int64_t> first_token, first_row;
  std::vector<float> layer_means;    // [captured, mean_of_layers.size(), H]
  std::vector<float> final_streams;  // [captured, hc, H] after the last layer
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

  // Keeps the first `keep` of the tokens recorded in `undo` (a forward call's request for
  // `state`) and forgets the rest: afterwards the state is exactly what feeding only those
  // would have made it (compressors, compressed entries and indexer keys, length).
  void rollback(SequenceKv& state, const KvUndo& undo, int64_t keep, QuantSimulation sim) const;

  // Keeps this rank's part of the weights (shard.h) and runs every forward with
  // `parallel.comm`'s collectives; every rank must make the same calls. Reads the pages of
  // the kept weights once. Throws flint::Error if the config does not split that many ways.
  void distribute(const ModelParallel& parallel);
  Comm* comm() const { return parallel_.comm; }
  const ModelParallel& parallel() const { return parallel_; }
  // Bytes of weights this rank keeps, and of them the copies sharding made.
  uint64_t local_weight_bytes() const { return weight_bytes(weights_); }
  uint64_t shard_copy_bytes() const { return shard_buffers_.bytes(); }

  // For drafts, which share the target's embedding and head and read its checkpoint.
  const TargetWeights& weights() const { return weights_; }
  const LayerRope& rope(int64_t layer) const { return ropes_[static_cast<size_t>(layer)]; }
  // The checkpoint the weights view (null when built from parameters alone).
  const std::shared_ptr<const Checkpoint>& checkpoint() const { return checkpoint_; }
  void set_checkpoint(std::shared_ptr<const Checkpoint> checkpoint) {
    checkpoint_ = std::move(checkpoint);
  }
  // The head over normalised rows x [m, H]: logits [m, vocab], on every rank. Split over
  // ranks, each computes its vocabulary's and they are gathered (a collective). The drafts
  // (their own norm first) use it too.
  std::vector<float> head_logits(float* x, int64_t m) const;

  // Drafts split like the target (docs/parallel.md): load a draft's parameters with
  // draft_load_options(base) (a rank reads only its part), then distribute_draft() its
  // blocks (MTP's layer, DSpark's stages): keeps this rank's part, with the copies in
  // `buffers` (owned by the draft), reads its pages once and checks its E8M0 scales
  // (throws flint::Error naming the tensor). Both do nothing on one rank.
  LoadOptions draft_load_options(LoadOptions base) const;
  void distribute_draft(std::span<BlockWeights* const> blocks, const LoadedParams& params,
                        ShardBuffers& buffers) const;

 private:
  // The rank's plan, with `buffers` set to drop the pages of the columns sharding copies.
  ShardPlan begin_sharding(const ModelParallel& parallel, ShardBuffers& buffers) const;

  Config config_;
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::shared_ptr<const LoadedParams> params_;
  TargetWeights weights_;
  std::vector<LayerRope> ropes_;  // per layer
  uint64_t identity_ = 0;
  ModelParallel parallel_;
  ShardBuffers shard_buffers_;
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
// With `parallel.comm` of more than one rank, each rank keeps and reads only its part
// (Model::distribute).
std::unique_ptr<Model> load_model(const std::filesystem::path& dir, const LoadOptions& options = {},
                                  const ModelParallel& parallel = {});

}  // namespace flint::dsv4
