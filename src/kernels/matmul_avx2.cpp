// matmul for AVX2 + FMA + F16C: 8 float32 lanes, weights decoded in registers.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// Every header the driver uses is included here, before the target region: their inline
// functions must stay compiled for the baseline CPU (the linker may keep this copy).
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "formats/weight.h"
#include "kernels/matmul_isa.h"

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/matmul_driver.h"

namespace flint::kernels::detail {
namespace {

struct Avx2 {
  static constexpr int kLanes = 8;
  using V = __m256;
  struct Table {
    __m256 low, high;  // values of nibbles 0..7 and 8..15
  };
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  // out[i] = the horizontal sum of v[i] (halves: 4 lanes, 2, 1), N <= 8 at once: each step
  // does the same additions as for one vector, for several per instruction. Lane 4q + j
  // of the last step holds v[2j + q].
  template <int N>
  [[gnu::always_inline]] static void hsums(const V* v, float* out) {
    static_assert(N >= 1 && N <= 8);
    const V zero = _mm256_setzero_ps();
    constexpr int kW = (N + 1) / 2, kZ = (kW + 1) / 2;
    V w[4], z[2];
#pragma GCC unroll 4
    for (int m = 0; m < kW; ++m) {  // 128-bit half q of w[m]: v[2m + q]'s halves added
      const V a = v[2 * m], b = 2 * m + 1 < N ? v[2 * m + 1] : zero;
      w[m] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
#pragma GCC unroll 2
    for (int p = 0; p < kZ; ++p) {  // lanes 2 apart
      const V a = w[2 * p], b = 2 * p + 1 < kW ? w[2 * p + 1] : zero;
      z[p] = _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xEE));
    }
    const V a = z[0], b = kZ > 1 ? z[1] : zero;  // neighbouring lanes
    alignas(32) float sums[8];
    _mm256_store_ps(sums,
                    _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xDD)));
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i) out[i] = sums[4 * (i % 2) + i / 2];
  }

  static V bf16(const uint16_t* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
  // As the AVX-512 version (matmul_avx512.cpp): E4M3 -> FP16 by moving bits, then F16C.
  static V fp8(const uint8_t* p, V factor) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7),
                                    _mm_set1_epi16(static_cast<short>(0xBF80)));
    const V v = _mm256_mul_ps(_mm256_cvtph_ps(h), factor);
    const __m256i nan =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_cvtepi8_epi32(b), _mm256_set1_epi32(0x7F)),
                           _mm256_set1_epi32(0x7F));
    return _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_castsi256_ps(nan));
  }
  static Table fp4_table(float scale) {
    const V s = _mm256_set1_ps(scale);
    return {_mm256_mul_ps(_mm256_loadu_ps(kFp4E2M1Values), s),
            _mm256_mul_ps(_mm256_loadu_ps(kFp4E2M1Values + 8), s)};
  }
  static V lookup(const Table& t, __m256i nibble) {
    // permutevar reads 3 index bits; bit 3 (moved to the sign) picks the table half.
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t.low, nibble),
                            _mm256_permutevar8x32_ps(t.high, nibble),
                            _mm256_castsi256_ps(_mm256_slli_epi32(nibble, 28)));
  }
  static void fp4(const uint8_t* p, const Table& t, V& lo, V& hi) {
    const __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = lookup(t, _mm256_and_si256(d, _mm256_set1_epi32(15)));
    hi = lookup(t, _mm256_srli_epi32(d, 4));
  }
};

using Driver = MatmulDriver<Avx2>;

}  // namespace
}  // namespace flint::kernels::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // __x86_64__

namespace flint::kernels::detail {

const MatmulIsa* matmul_isa_avx2() {
#if defined(__x86_64__)
  // F16C from CPUID directly: clang 14's __builtin_cpu_supports does not know it.
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  static const MatmulIsa isa{"avx2",        &Driver::scratch_bytes, &Driver::prepare_x,
                             &Driver::rows, &Driver::supports,      false};
  return ok ? &isa : nullptr;
#else
  return nullptr;
#endif
}

}  // namespace flint::kernels::detail
