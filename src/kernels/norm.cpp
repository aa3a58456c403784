#include "kernels/norm.h"

#include <cmath>

namespace flint::kernels {

float rms_inverse(const float* x, int64_t dim, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + eps));
}

void rms_norm(const float* x, const float* weight, int64_t n, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float inv = rms_inverse(xr, dim, eps);
    if (weight != nullptr) {
      for (int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
    } else {
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv;
    }
  }
}

}  // namespace flint::kernels
