#include "kernels/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace flint::kernels {

void topk(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out) {
  k = std::clamp<int64_t>(k, 0, n);
  out.resize(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  auto better = [x](int32_t a, int32_t b) {
    float va = x[a], vb = x[b];
    bool na = std::isnan(va), nb = std::isnan(vb);
    if (na != nb) return nb;
    if (va != vb && !na) return va > vb;
    return a < b;
  };
  std::partial_sort(out.begin(), out.begin() + k, out.end(), better);
  out.resize(static_cast<size_t>(k));
}

}  // namespace flint::kernels
