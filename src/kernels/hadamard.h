// Fast Walsh-Hadamard transform (Sylvester order), in place: x <- (H_n x) * scale.
// n must be a power of two. O(n log n). With scale = n^-1/2 the transform is orthogonal.
#pragma once

#include <cstdint>

namespace flint::kernels {

void hadamard_transform(float* x, int64_t n, float scale);

}  // namespace flint::kernels
