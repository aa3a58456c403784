// A compressor's pending rows: the block of `ratio` tokens being compressed and, for
// overlapping compressors (ratio 4), the previous complete block, whose rows take part in
// the next entry. Owned by the sequence (not paged): O(ratio * width) floats per layer.
#pragma once

#include <cstdint>
#include <vector>

namespace flint::dsv4 {

struct CompressorState {
  int64_t ratio = 0;
  int64_t width = 0;              // (overlap ? 2 : 1) * head_dim
  std::vector<float> kv;          // [ratio, width] rows of the current block
  std::vector<float> score;       // [ratio, width] gate scores + ape
  std::vector<float> prev_kv;     // [ratio, width] previous block (overlap only)
  std::vector<float> prev_score;  // [ratio, width]; -inf before the first block completes

  bool overlap() const { return !prev_kv.empty(); }
  void reset(int64_t ratio_, int64_t width_, bool overlap);
};

}  // namespace flint::dsv4
