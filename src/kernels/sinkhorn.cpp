#include "kernels/sinkhorn.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace flint::kernels {

namespace {
void normalize_columns(float* m, int64_t n, float eps) {
  for (int64_t k = 0; k < n; ++k) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += m[j * n + k];
    for (int64_t j = 0; j < n; ++j) m[j * n + k] /= (s + eps);
  }
}
void normalize_rows(float* m, int64_t n, float eps) {
  for (int64_t j = 0; j < n; ++j) {
    float s = 0.0f;
    for (int64_t k = 0; k < n; ++k) s += m[j * n + k];
    for (int64_t k = 0; k < n; ++k) m[j * n + k] /= (s + eps);
  }
}
}  // namespace

void sinkhorn(float* m, int64_t n, int64_t iters, float eps) {
  for (int64_t j = 0; j < n; ++j) {
    float* row = m + j * n;
    float mx = *std::max_element(row, row + n);
    float s = 0.0f;
    for (int64_t k = 0; k < n; ++k) {
      row[k] = std::exp(row[k] - mx);
      s += row[k];
    }
    for (int64_t k = 0; k < n; ++k) row[k] = row[k] / s + eps;
  }
  normalize_columns(m, n, eps);
  for (int64_t it = 1; it < iters; ++it) {
    normalize_rows(m, n, eps);
    normalize_columns(m, n, eps);
  }
}

}  // namespace flint::kernels
