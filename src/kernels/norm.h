// RMS normalisation of rows: y = x / sqrt(mean(x^2) + eps) * weight.
#pragma once

#include <cstdint>

namespace flint::kernels {

// x, y: [n, dim] (may alias). weight: [dim], or nullptr for the unweighted norm.
// Sums in double: the reference sums in float32 with a different order, double keeps
// flint's error below both.
void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y);

// 1 / sqrt(mean(x^2) + eps) of one row.
float rms_inverse(const float* x, int64_t dim, float eps);

}  // namespace flint::kernels
