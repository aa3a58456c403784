// Horizontal sums of several AVX-512 float vectors at once, each with exactly the additions
// of the one-vector reduction matmul_isa.h specifies (halves: 8 lanes, 4, 2, 1). Include
// only inside a target region with AVX-512 F and DQ (matmul_avx512.cpp,
// matmul_avx512_bf16.cpp).
//
// One vector alone takes 4 adds and 4 shuffles for one sum; a tree over up to 16 vectors
// does each step for several vectors per instruction (16 sums: 15 adds, 30 shuffles).
#pragma once

#include <immintrin.h>

namespace flint::kernels::detail {

// out[i] = horizontal sum of v[i], i < N (N <= 16), bit for bit as the one-vector order.
// Absent inputs (i >= N) are skipped where a whole subtree is absent, else zero.
template <int N>
[[gnu::always_inline]] inline void hsums_avx512(const __m512* v, float* out) {
  static_assert(N >= 1 && N <= 16);
  const __m512 zero = _mm512_setzero_ps();
  // Step 1, pairs of vectors: lanes 0-7 of u[k] = v[2k]'s 256-bit halves added, lanes 8-15
  // the same for v[2k + 1].
  __m512 u[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    if (2 * k >= N) continue;
    const __m512 a = v[2 * k], b = 2 * k + 1 < N ? v[2 * k + 1] : zero;
    u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  // Step 2: quarter q of w[m] = the 128-bit halves of v[4m + q]'s step-1 sum added.
  constexpr int kU = (N + 1) / 2, kW = (kU + 1) / 2, kZ = (kW + 1) / 2;
  __m512 w[4];
#pragma GCC unroll 4
  for (int m = 0; m < kW; ++m) {
    const __m512 a = u[2 * m], b = 2 * m + 1 < kU ? u[2 * m + 1] : zero;
    w[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  }
  // Step 3, lanes 2 apart: quarter q of z[p] holds v[8p + q] (lanes 0-1), v[8p + 4 + q] (2-3).
  __m512 z[2];
#pragma GCC unroll 2
  for (int p = 0; p < kZ; ++p) {
    const __m512 a = w[2 * p], b = 2 * p + 1 < kW ? w[2 * p + 1] : zero;
    z[p] = _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
  }
  // Step 4, neighbouring lanes: lane 4q + j holds v[4j + q].
  const __m512 a = z[0], b = kZ > 1 ? z[1] : zero;
  alignas(64) float sums[16];
  _mm512_store_ps(sums,
                  _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD)));
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i) out[i] = sums[4 * (i % 4) + i / 4];
}

}  // namespace flint::kernels::detail
