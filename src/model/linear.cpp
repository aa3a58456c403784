#include "model/linear.h"

#include <algorithm>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant_round.h"

namespace flint {

void Linear::forward(const float* x, int64_t n, float* y, QuantSimulation sim) const {
  const LinearCall call{this, x, n, y};
  forward_many({&call, 1}, sim);
}

void forward_many(std::span<const LinearCall> calls, QuantSimulation sim) {
  // Rounded copies of the inputs that need one, in a single buffer (offsets first: the
  // buffer may grow while they are taken).
  thread_local std::vector<float> rounded;
  thread_local std::vector<kernels::MatmulTask> tasks;
  thread_local std::vector<int64_t> offsets;
  tasks.clear();
  offsets.assign(calls.size(), -1);
  size_t used = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const LinearCall& c = calls[i];
    if (!c.linear->quantize_input || sim != QuantSimulation::kOfficial) continue;
    if (i > 0 && offsets[i - 1] >= 0 && calls[i - 1].x == c.x && calls[i - 1].n == c.n &&
        calls[i - 1].linear->in_features() == c.linear->in_features()) {
      offsets[i] = offsets[i - 1];
      continue;
    }
    offsets[i] = static_cast<int64_t>(used);
    used += static_cast<size_t>(c.n * c.linear->in_features());
  }
  if (rounded.size() < used) rounded.resize(used);
  for (size_t i = 0; i < calls.size(); ++i) {
    const LinearCall& c = calls[i];
    const float* x = c.x;
    if (offsets[i] >= 0) {
      float* dst = rounded.data() + offsets[i];
      const int64_t in = c.linear->in_features();
      if (i == 0 || offsets[i] != offsets[i - 1]) {
        std::copy(c.x, c.x + c.n * in, dst);
        for (int64_t r = 0; r < c.n; ++r) kernels::round_fp8_blocks(dst + r * in, in, 128);
      }
      x = dst;
    }
    tasks.push_back({&c.linear->weight, x, c.n, c.y});
  }
  kernels::matmul_many(tasks);
}

}  // namespace flint
