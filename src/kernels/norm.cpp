#include "kernels/norm.h"

#include <cmath>

#include "base/thread_pool.h"

namespace flint::kernels {

float rms_inverse(const float* x, int64_t dim, float eps) {
  // Eight partial sums (element i goes to sum i % 8), added pairwise at the end: a single
  // chain of dependent double adds made a 1024-dim row latency-bound (a microsecond; the
  // hyper-connections' 4096 values four). Squares of floats are exact in double.
  constexpr int kLanes = 8;
  double part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) part[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  for (int k = 0; i < dim; ++i, ++k) part[k] += static_cast<double>(x[i]) * x[i];
  const double sum =
      ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
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
