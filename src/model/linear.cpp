#include "model/linear.h"

#include <cstring>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant_round.h"

namespace flint {

void Linear::forward(const float* x, int64_t n, float* y, QuantSimulation sim) const {
  if (quantize_input && sim == QuantSimulation::kOfficial) {
    thread_local std::vector<float> rounded;
    const int64_t in = in_features();
    rounded.assign(x, x + n * in);
    for (int64_t r = 0; r < n; ++r) kernels::round_fp8_blocks(rounded.data() + r * in, in, 128);
    kernels::matmul(weight, rounded.data(), n, y);
    return;
  }
  kernels::matmul(weight, x, n, y);
}

}  // namespace flint
