// Sinkhorn normalisation of a square matrix towards a doubly stochastic one, in the exact
// order DeepSeek-V4's hyper-connections use: row softmax, + eps, column normalisation,
// then (iters - 1) rounds of row then column normalisation, each dividing by (sum + eps).
#pragma once

#include <cstdint>

namespace flint::kernels {

// m: [n, n] row-major, in place.
void sinkhorn(float* m, int64_t n, int64_t iters, float eps);

}  // namespace flint::kernels
