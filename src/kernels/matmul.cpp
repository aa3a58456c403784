#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "base/thread_pool.h"
#include "formats/bf16.h"

namespace flint::kernels {

namespace {

// Dot product of a row (elements widened by `load`) with float32 x. 16 independent partial
// sums let the compiler keep them in vector registers without reassociating float additions;
// the final reduction order is fixed, so results do not depend on how callers split work.
template <typename T, typename Load>
float dot_impl(const T* w, const float* x, int64_t n, Load load) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += load(w[i + j]) * x[i + j];
  }
  for (; i < n; ++i) acc[i & 15] += load(w[i]) * x[i];
  float s0 = 0.f, s1 = 0.f;
  for (int j = 0; j < 16; j += 2) {
    s0 += acc[j];
    s1 += acc[j + 1];
  }
  return s0 + s1;
}

// A BF16 row widened on the fly (no row buffer): the decode path of the head and of every
// BF16 projection. Same sums in the same order as dot() on the dequantised row.
float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return dot_impl(w, x, n, [](uint16_t v) { return bf16_to_float(v); });
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  return dot_impl(a, b, n, [](float v) { return v; });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y) {
  if (n <= 0 || w.rows == 0) return;
  const int64_t cols = w.cols;
  if (w.format == WeightFormat::kF32 || (w.format == WeightFormat::kBF16 && n <= 4)) {
    // Formats that need no dequantisation: multiply straight from the weight.
    parallel_for(static_cast<size_t>(w.rows), 64, [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        for (int64_t i = 0; i < n; ++i) {
          float v = w.format == WeightFormat::kF32
                        ? dot(reinterpret_cast<const float*>(w.data) + r * cols, x + i * cols, cols)
                        : dot_bf16(reinterpret_cast<const uint16_t*>(w.data) + r * cols,
                                   x + i * cols, cols);
          y[i * w.rows + static_cast<int64_t>(r)] = v;
        }
      }
    });
    return;
  }
  // Rows per task: a multiple of 128 keeps FP8 blocks whole; small enough to balance threads.
  constexpr int64_t kRowsPerTask = 32;
  const int64_t tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(static_cast<size_t>(tasks), 1, [&](size_t t_begin, size_t t_end) {
    thread_local std::vector<float> rows_buf;
    rows_buf.resize(static_cast<size_t>(kRowsPerTask * cols));
    for (size_t t = t_begin; t < t_end; ++t) {
      int64_t r0 = static_cast<int64_t>(t) * kRowsPerTask;
      int64_t r1 = std::min(w.rows, r0 + kRowsPerTask);
      w.dequantize_rows(r0, r1, rows_buf.data());
      for (int64_t i = 0; i < n; ++i) {
        const float* xi = x + i * cols;
        float* yi = y + i * w.rows;
        for (int64_t r = r0; r < r1; ++r) yi[r] = dot(rows_buf.data() + (r - r0) * cols, xi, cols);
      }
    }
  });
}

}  // namespace flint::kernels
