// matmul for AVX-512 (F, BW, VL, DQ): 16 float32 lanes, weights decoded in registers.
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
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which its flow analysis
// reports as uninitialised once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/hsum_avx512.h"
#include "kernels/matmul_driver.h"

namespace flint::kernels::detail {
namespace {

struct Avx512 {
  static constexpr int kLanes = 16;
  using V = __m512;
  struct Table {
    __m512 values;
  };
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  template <int N>
  [[gnu::always_inline]] static void hsums(const V* v, float* out) {
    hsums_avx512<N>(v, out);
  }
  template <int T>
  [[gnu::always_inline]] static void flush_rows4(const V (&acc)[4][T], int64_t r0, bool first,
                                                 float* y, int64_t ldy) {
    flush_rows4_avx512<T>(acc, r0, first, y, ldy);
  }

  static V bf16(const uint16_t* p) {
    const __m512i u =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
  // E4M3 -> FP16 by moving bits (the exponent keeps E4M3's bias 7, so the half is the value
  // times 2^-8; E4M3 subnormals land on FP16 subnormals), then the hardware FP16 -> FP32
  // conversion, which takes subnormal inputs at full speed, unlike a multiply (denormal
  // operands cost microcode assists on some cores). Sign-extending to 16 bits and shifting
  // by 7 puts the sign in bit 15 and the 7 exponent-mantissa bits in 7..13; bit 14 (a copy
  // of the sign) is cleared. Codes 0x7F/0xFF are NaN.
  static V fp8(const uint8_t* p, V factor) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7),
                                       _mm256_set1_epi16(static_cast<short>(0xBF80)));
    const V v = _mm512_mul_ps(_mm512_cvtph_ps(h), factor);
    const __mmask16 nan =
        _mm_cmpeq_epi8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F));
    return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(NAN));
  }
  static Table fp4_table(float scale) {
    return {_mm512_mul_ps(_mm512_loadu_ps(kFp4E2M1Values), _mm512_set1_ps(scale))};
  }
  static void fp4(const uint8_t* p, const Table& t, V& lo, V& hi) {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm512_permutexvar_ps(_mm512_and_si512(d, _mm512_set1_epi32(15)), t.values);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), t.values);
  }
};

using Driver = MatmulDriver<Avx512>;

}  // namespace
}  // namespace flint::kernels::detail

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif  // __x86_64__

namespace flint::kernels::detail {

const MatmulIsa* matmul_isa_avx512() {
#if defined(__x86_64__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  static const MatmulIsa isa{"avx512",      &Driver::scratch_bytes, &Driver::prepare_x,
                             &Driver::rows, &Driver::supports,      false};
  return ok ? &isa : nullptr;
#else
  return nullptr;
#endif
}

}  // namespace flint::kernels::detail
