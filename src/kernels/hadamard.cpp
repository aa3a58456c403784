#include "kernels/hadamard.h"

#include "base/check.h"

namespace flint::kernels {

void hadamard_transform(float* x, int64_t n, float scale) {
  FLINT_CHECK(n > 0 && (n & (n - 1)) == 0, "Hadamard size {} is not a power of two", n);
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        float a = x[j];
        float b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace flint::kernels
