// A linear layer as the model sees it: a weight in some storage format plus what the
// official DeepSeek code does to its input.
#pragma once

#include <cstdint>
#include <span>

#include "formats/weight.h"

namespace flint {

// Which activation roundings to reproduce (the --quant-simulation switch).
//  kOfficial: what DeepSeek's inference code does (FP8 blocks of 128 on the inputs of FP8 and
//             FP4 linears, FP8 blocks of 64 on the KV's non-rope dims, Hadamard + FP4 in the
//             indexer). The default: the model was trained with these roundings.
//  kOff:      activations stay float32, for comparison with implementations that do not
//             simulate them (llama.cpp).
enum class QuantSimulation { kOfficial, kOff };

struct Linear {
  WeightMatrix weight;          // [out, in]
  bool quantize_input = false;  // official code rounds the input to FP8 blocks of 128 first

  int64_t in_features() const { return weight.cols; }
  int64_t out_features() const { return weight.rows; }

  // y[n, out] = round?(x)[n, in] . W^T. `x` is not modified (rounding works on a copy).
  void forward(const float* x, int64_t n, float* y, QuantSimulation sim) const;
};

// One product of forward_many.
struct LinearCall {
  const Linear* linear = nullptr;
  const float* x = nullptr;  // [n, in]
  int64_t n = 0;
  float* y = nullptr;  // [n, out]
};

// Independent products in one parallel region (the experts of a MoE layer: many small
// weights). Calls with the same x and n round it once.
void forward_many(std::span<const LinearCall> calls, QuantSimulation sim);

}  // namespace flint
