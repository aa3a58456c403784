#include "model/linear.h"

#include <algorithm>
#include <vector>

#include "base/thread_pool.h"
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
    for (size_t j = 0; j < i && offsets[i] < 0; ++j) {  // the same input rounded already
      if (offsets[j] >= 0 && calls[j].x == c.x && calls[j].n == c.n &&
          calls[j].linear->in_features() == c.linear->in_features())
        offsets[i] = offsets[j];
    }
    if (offsets[i] >= 0) continue;
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
      bool first = true;  // the first call of this input rounds it
      for (size_t j = 0; j < i && first; ++j) first = offsets[j] != offsets[i];
      if (first) {
        const float* src = c.x;
        parallel_for(static_cast<size_t>(c.n), 8, [&](size_t r0, size_t r1) {
          for (size_t r = r0; r < r1; ++r) {
            float* row = dst + static_cast<int64_t>(r) * in;
            std::copy(src + static_cast<int64_t>(r) * in, src + static_cast<int64_t>(r + 1) * in,
                      row);
            kernels::round_fp8_blocks(row, in, 128);
          }
        });
      }
      x = dst;
    }
    // FP8 values times power-of-two scales: exact in bf16, so the kernel may multiply in it.
    tasks.push_back({&c.linear->weight, x, c.n, c.y, offsets[i] >= 0});
  }
  kernels::matmul_many(tasks);
}

}  // namespace flint
