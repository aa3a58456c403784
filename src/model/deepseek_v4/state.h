// Per-sequence inference state of DeepSeek-V4: everything a sequence needs to continue
// from where its last forward call stopped. Prefill of many tokens, chunked prefill and
// one-token decoding all read and extend the same state, so they give the same logits.
//
// Per layer: the sliding-window ring of KV rows, the compressed KV entries, the indexer's
// compressed keys, and each compressor's pending (incomplete) block. Memory grows with
// the sequence: entries are appended as blocks of `ratio` tokens complete.
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek_v4/config.h"

namespace flint::dsv4 {

// The rows of the block being compressed. For ratio 4 (overlap) also the previous
// complete block, whose first halves take part in the next entry.
struct CompressorState {
  int64_t ratio = 0;
  int64_t width = 0;              // (overlap ? 2 : 1) * head_dim
  std::vector<float> kv;          // [ratio, width] rows of the current block
  std::vector<float> score;       // [ratio, width] gate scores + ape
  std::vector<float> prev_kv;     // [ratio, width] previous block (overlap only)
  std::vector<float> prev_score;  // [ratio, width]; -inf before the first block completes

  void reset(int64_t ratio_, int64_t width_, bool overlap);
};

struct LayerState {
  std::vector<float> window;   // [sliding_window, head_dim], row = position % sliding_window
  std::vector<float> entries;  // [n_entries, head_dim] compressed KV
  CompressorState compressor;
  std::vector<float> index_keys;  // [n_entries, index_head_dim] (ratio-4 layers)
  CompressorState index_compressor;
};

struct SequenceState {
  int64_t length = 0;  // tokens processed so far = position of the next token
  std::vector<LayerState> layers;
};

// A fresh state for the target's layers (or for any list of layer ids of `config`).
SequenceState new_sequence_state(const Config& config);

}  // namespace flint::dsv4
