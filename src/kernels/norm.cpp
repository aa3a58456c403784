#include "kernels/norm.h"

#include <cmath>

#include "base/thread_pool.h"

namespace flint::kernels {

float rms_inverse(const float* x, int64_t dim, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
}

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y) {
  // Rows split over the thread pool (rows are independent).
  parallel_for(static_cast<size_t>(n), grain_for(dim), [&](size_t b, size_t e) {
    for (auto r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      float inv = rms_inverse(xr, dim, eps);
      if (weight != nullptr) {
        for (int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
      } else {
        for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv;
      }
    }
  });
}

}  // namespace flint::kernels
