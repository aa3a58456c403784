#include "model/deepseek_v4/state.h"

#include <limits>

namespace flint::dsv4 {

void CompressorState::reset(int64_t ratio_, int64_t width_, bool overlap) {
  ratio = ratio_;
  width = width_;
  size_t n = static_cast<size_t>(ratio * width);
  kv.assign(n, 0.0f);
  score.assign(n, -std::numeric_limits<float>::infinity());
  if (overlap) {
    prev_kv.assign(n, 0.0f);
    prev_score.assign(n, -std::numeric_limits<float>::infinity());
  } else {
    prev_kv.clear();
    prev_score.clear();
  }
}

SequenceState new_sequence_state(const Config& c) {
  SequenceState s;
  s.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerState& l = s.layers[static_cast<size_t>(i)];
    l.window.assign(static_cast<size_t>(c.sliding_window * c.head_dim), 0.0f);
    int64_t ratio = c.compress_ratio(i);
    if (ratio > 0) {
      bool overlap = ratio == 4;
      l.compressor.reset(ratio, (overlap ? 2 : 1) * c.head_dim, overlap);
      if (ratio == 4) l.index_compressor.reset(ratio, 2 * c.index_head_dim, true);
    }
  }
  return s;
}

}  // namespace flint::dsv4
