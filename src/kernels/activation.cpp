#include "kernels/activation.h"

#include <algorithm>
#include <cmath>

namespace flint::kernels {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void swiglu(const float* gate, const float* up, int64_t n, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    float u = up[i];
    if (limit > 0) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    out[i] = silu(g) * u;
  }
}

}  // namespace flint::kernels
