// DeepSeek-V4 attention for a batch of sequence chunks: low-rank q with per-head RMS
// norm, one shared K=V head, interleaved RoPE on the last rope dims, a sliding window of
// recent tokens plus compressed entries (all of them on ratio-128 layers, the indexer's
// top-k on ratio-4 layers), attention sinks, inverse RoPE on the output, and the grouped
// low-rank output projection.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/comm.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/kv_store.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

// What rolling one layer back after speculative tokens needs (compressor.h).
struct LayerUndo {
  CompressorUndo main, index;
};

// The rows of one sequence inside a batch: x rows [row, row + n) are its tokens at
// positions pos0 .. pos0 + n - 1.
struct Segment {
  LayerKv* state = nullptr;
  int64_t row = 0;
  int64_t n = 0;
  int64_t pos0 = 0;
  // A DSpark draft block: every token sees all of the chunk (not only earlier ones) plus
  // the store's window before pos0, and the chunk's rows are not stored. Window-only layers.
  bool block = false;
  LayerUndo* undo = nullptr;  // non-null: record what a rollback needs (speculative tokens)
};

struct LayerRope {
  std::vector<float> inv_freq;  // qk_rope_head_dim / 2 frequencies of this layer
};

// The layer's RoPE: base rope_theta without YaRN on ratio-0 layers; compress_rope_theta
// with YaRN on compressed layers.
LayerRope layer_rope(const Config& c, int64_t compress_ratio);

// x: [N, H] normalised inputs of all segments; out: [N, H]. Appends each segment's rows to
// its store (rounded to the store's format before use, so stored and fresh rows agree).
// With `comm` (tensor parallelism, shard.h) the weights hold this rank's heads: the indexer
// scores and the output are summed over the ranks, and every rank gets the whole `out`.
void attention_forward(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                       std::span<const Segment> segments, const float* x, int64_t n_rows,
                       float* out, QuantSimulation sim, Comm* comm = nullptr);

// How many indexer scores (floats) attention holds at once: a chunk's tokens are scored in
// blocks of at most this many scores (at least one token per block), so that a long prompt's
// chunk at a late position does not hold its tokens x position / ratio scores at once.
// Default 16 Mi (64 MiB: a 2,048-token chunk at position 1M scores in 64-token blocks).
// Tests lower it to run the blocked path on short contexts; results do not depend on it.
int64_t index_score_block_floats();
void set_index_score_block_floats(int64_t floats);

// Undoes a recorded segment's tokens beyond its first `keep` in `store` (compressors and
// entries; window rows of later positions are simply never read).
void attention_rollback(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                        LayerKv& store, const LayerUndo& undo, int64_t keep, QuantSimulation sim);

// The KV row of one token as attention stores it (kv_norm(wkv(x)), RoPE at `pos`, the
// quant simulation's and the store's rounding): for drafts that write context rows
// computed from something other than the layer's own input (DSpark). x: [n, H] at
// positions pos0.., out: [n, head_dim].
void attention_kv_rows(const AttentionWeights& w, const Config& c, const LayerRope& rope,
                       const LayerKv& store, const float* x, int64_t n, int64_t pos0, float* out,
                       QuantSimulation sim);

}  // namespace flint::dsv4
