#include "kernels/softmax.h"

#include <cmath>
#include <limits>

namespace flint::kernels {

void softmax_with_sink(float* x, int64_t n, float sink) {
  if (n <= 0) return;
  // The reference takes the max over the scores only and adds exp(sink - max) to the sum.
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  if (sink > -std::numeric_limits<float>::infinity())
    sum += std::exp(static_cast<double>(sink) - m);
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax(float* x, int64_t n) {
  softmax_with_sink(x, n, -std::numeric_limits<float>::infinity());
}

}  // namespace flint::kernels
