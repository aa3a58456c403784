// y = x . W^T for a weight in any storage format (formats/weight.h).
//
// Shapes: x [n, w.cols] row-major, y [n, w.rows] row-major. Work is split over the thread
// pool by blocks of weight rows; each block is dequantised to float32 once and multiplied
// with all n inputs, so a weight is read from memory once per call whatever n is.
// Accumulation is float32 in a fixed order per output (results do not depend on the
// thread count).
#pragma once

#include <cstdint>

#include "formats/weight.h"

namespace flint::kernels {

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y);

// Dot product of two float32 vectors of length n (several accumulators, fixed order).
float dot(const float* a, const float* b, int64_t n);

}  // namespace flint::kernels
