// Softmax variants used by attention and routing.
#pragma once

#include <cstdint>

namespace flint::kernels {

// In place over x[0..n): exp(x - m) / (sum exp(x - m) + exp(sink - m)), m = max(x).
// DeepSeek's attention sink: a logit that only enters the denominator. Pass
// sink = -infinity for the plain softmax. n == 0 is allowed (nothing to do).
void softmax_with_sink(float* x, int64_t n, float sink);

// Plain softmax in place.
void softmax(float* x, int64_t n);

}  // namespace flint::kernels
