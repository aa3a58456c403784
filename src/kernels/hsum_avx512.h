// Horizontal sums of several AVX-512 float vectors at once, each with exactly the additions
// of the one-vector reduction matmul_isa.h specifies (halves: 8 lanes, 4, 2, 1). Include
// only inside a target region with AVX-512 F and DQ (matmul_avx512.cpp,
// matmul_avx512_bf16.cpp).
//
// One vector alone takes 4 adds and 4 shuffles for one sum; a tree over up to 16 vectors
// does each step for several vectors per instruction (16 sums: 15 adds, 30 shuffles).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace flint::kernels::detail {

// The sums of v[i] for the inputs whose bit is set in kPresent (the others are not read),
// in one vector: lane 4q + j holds the sum of v[4j + q]. Bit for bit the one-vector order:
// lanes of different inputs never meet, so an absent input (zero) changes no other sum;
// pairs and subtrees wholly absent are skipped.
template <uint32_t kPresent>
[[gnu::always_inline]] inline __m512 hsum_lanes_avx512(const __m512* v) {
  static_assert(kPresent != 0 && kPresent <= 0xFFFF);
  const __m512 zero = _mm512_setzero_ps();
  // Which of 2^level consecutive inputs starting at i are present.
  constexpr auto any = [](int i, int count) { return ((kPresent >> i) & ((1u << count) - 1)) != 0; };
  // Step 1, pairs of vectors: lanes 0-7 of u[k] = v[2k]'s 256-bit halves added, lanes 8-15
  // the same for v[2k + 1].
  __m512 u[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    if (!any(2 * k, 2)) continue;
    const __m512 a = any(2 * k, 1) ? v[2 * k] : zero, b = any(2 * k + 1, 1) ? v[2 * k + 1] : zero;
    u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  // Step 2: quarter q of w[m] = the 128-bit halves of v[4m + q]'s step-1 sum added.
  __m512 w[4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    if (!any(4 * m, 4)) continue;
    const __m512 a = any(4 * m, 2) ? u[2 * m] : zero, b = any(4 * m + 2, 2) ? u[2 * m + 1] : zero;
    w[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  }
  // Step 3, lanes 2 apart: quarter q of z[p] holds v[8p + q] (lanes 0-1), v[8p + 4 + q] (2-3).
  __m512 z[2];
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
    if (!any(8 * p, 8)) continue;
    const __m512 a = any(8 * p, 4) ? w[2 * p] : zero, b = any(8 * p + 4, 4) ? w[2 * p + 1] : zero;
    z[p] = _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE));
  }
  // Step 4, neighbouring lanes: lane 4q + j holds v[4j + q].
  const __m512 a = any(0, 8) ? z[0] : zero, b = any(8, 8) ? z[1] : zero;
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

// out[i] = horizontal sum of v[i], i < N (N <= 16), bit for bit as the one-vector order.
template <int N>
[[gnu::always_inline]] inline void hsums_avx512(const __m512* v, float* out) {
  static_assert(N >= 1 && N <= 16);
  alignas(64) float sums[16];
  _mm512_store_ps(sums, hsum_lanes_avx512<(1u << N) - 1>(v));
#pragma GCC unroll 16
  for (int i = 0; i < N; ++i) out[i] = sums[4 * (i % 4) + i / 4];
}

// y[t * ldy + r0 + r] = (first) or += the horizontal sum of acc[r][t], for 4 rows: each
// input's 4 sums come out of the tree side by side (v[4r + t] for 4 inputs at a time) and
// go to y as one 128-bit store. Storing the tree's vector and reloading its lanes one by one
// (hsums_avx512) cost 7% of the BF16 head's register tile at 16 inputs in cache (Zen 4, 1
// thread: 89.4 -> 95.9 GFLOP/s with 24 one-vector reductions, 105.8 with this).
template <int T, int T0 = 0>
[[gnu::always_inline]] inline void flush_rows4_avx512(const __m512 (&acc)[4][T], int64_t r0,
                                                      bool first, float* y, int64_t ldy) {
  if constexpr (T0 < T) {
    constexpr int kG = T - T0 < 4 ? T - T0 : 4;  // inputs in this tree
    __m512 v[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (i % 4 < kG) v[i] = acc[i / 4][T0 + i % 4];
    constexpr uint32_t kPresent = 0x1111u * ((1u << kG) - 1);
    const __m512 s = hsum_lanes_avx512<kPresent>(v);
#pragma GCC unroll 4
    for (int t = 0; t < kG; ++t) {
      __m128 h;
      switch (t) {  // the lane group must be an immediate
        case 0: h = _mm512_castps512_ps128(s); break;
        case 1: h = _mm512_extractf32x4_ps(s, 1); break;
        case 2: h = _mm512_extractf32x4_ps(s, 2); break;
        default: h = _mm512_extractf32x4_ps(s, 3); break;
      }
      float* out = y + (T0 + t) * ldy + r0;
      _mm_storeu_ps(out, first ? h : _mm_add_ps(_mm_loadu_ps(out), h));
    }
    flush_rows4_avx512<T, T0 + kG>(acc, r0, first, y, ldy);
  }
}

}  // namespace flint::kernels::detail
