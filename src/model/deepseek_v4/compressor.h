// The KV compressor of compressed-attention layers: every `ratio` tokens become one entry,
// a per-dimension softmax(gate)-weighted sum of the block's projected rows, then RMS norm
// and RoPE at the block's first position. Ratio 4 overlaps windows: an entry mixes the
// previous block's rows (first half of the projection) with the current block's rows
// (second half). The indexer runs its own compressor whose entries are also
// Hadamard-rotated.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/kv_store.h"
#include "model/deepseek_v4/weights.h"
#include "model/linear.h"

namespace flint::dsv4 {

struct CompressorRope {
  const std::vector<float>* inv_freq = nullptr;  // the layer's RoPE frequencies (rope_dim / 2)
  int64_t rope_dim = 0;                          // last rope_dim dims of an entry are rotated
};

// Feeds tokens at positions pos0 .. pos0 + n - 1, whose projections are kv and gate
// ([n, width] each, gate without ape), to the layer's `kind` compressor in `store`. Each
// block completed by these tokens appends one entry (head_dim floats, rounded to the
// store's format) to the store's entries (kMain) or indexer keys (kIndex). The indexer's
// entries are Hadamard-rotated, then FP4-rounded under kOfficial; the main ones have their
// non-rope dims FP8-rounded in blocks of 64 under kOfficial.
void compress_tokens(const CompressorWeights& w, LayerKv& store, CompressorKind kind,
                     const float* kv, const float* gate, int64_t n, int64_t pos0,
                     const CompressorRope& rope, float norm_eps, QuantSimulation sim);

// What rolling a compressor back after speculative tokens needs, recorded before they are
// fed: the pending rows they overwrite, the previous block (overlap compressors), the
// entry count, and the tokens' projections (the accepted ones are fed again). Costs
// O(n * width) floats, plus one block for overlap compressors.
struct CompressorUndo {
  bool recorded = false;
  int64_t pos0 = 0, n = 0;
  int64_t count0 = 0;          // entries (kMain) or indexer keys (kIndex) before
  std::vector<int64_t> slots;  // pending-row slots the tokens write
  std::vector<float> kv, score;            // [slots, width]: those rows before
  std::vector<float> prev_kv, prev_score;  // the previous block before (overlap)
  std::vector<float> in_kv, in_gate;       // [n, width]: the tokens' projections
};

// Records `undo` for feeding tokens pos0 .. pos0 + n - 1 (call right before compress_tokens).
void compressor_record(LayerKv& store, CompressorKind kind, const float* kv, const float* gate,
                       int64_t n, int64_t pos0, CompressorUndo& undo);
// Puts the compressor and its entries back to where they were before the recorded tokens,
// then feeds the first `keep` of them again: the state is then exactly as if only those
// had been fed.
void compressor_rollback(const CompressorWeights& w, LayerKv& store, CompressorKind kind,
                         const CompressorUndo& undo, int64_t keep, const CompressorRope& rope,
                         float norm_eps, QuantSimulation sim);

}  // namespace flint::dsv4
