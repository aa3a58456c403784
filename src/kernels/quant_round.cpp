#include "kernels/quant_round.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "formats/fp8.h"

namespace flint::kernels {

float pow2_scale(float amax, float max_code) {
  // ceil(log2(v)) from the float's bits, exactly as the reference's fast_log2_ceil.
  float v = amax * (1.0f / max_code);
  uint32_t bits = std::bit_cast<uint32_t>(v);
  int32_t exponent =
      static_cast<int32_t>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return std::ldexp(1.0f, exponent);
}

namespace {
template <typename RoundFn>
void round_blocks(float* x, int64_t n, int64_t block, float max_code, float amax_floor,
                  RoundFn round_code) {
  FLINT_CHECK(block > 0 && n % block == 0, "{} values do not split into blocks of {}", n, block);
  for (int64_t b = 0; b < n; b += block) {
    // Eight partial maxima (max is exact and NaN is ignored either way): one chain of
    // dependent maxima made this loop latency-bound.
    float part[8] = {};
    int64_t j = b;
    for (; j + 8 <= b + block; j += 8) {
      for (int k = 0; k < 8; ++k) part[k] = std::max(part[k], std::fabs(x[j + k]));
    }
    for (int k = 0; j < b + block; ++j, ++k) part[k] = std::max(part[k], std::fabs(x[j]));
    float amax = amax_floor;
    for (float p : part) amax = std::max(amax, p);
    float s = pow2_scale(amax, max_code);
    const float inv = 1.0f / s;  // exact: s is a power of two within 2^-126 .. 2^126
    for (int64_t i = b; i < b + block; ++i) {
      float q = std::clamp(x[i] * inv, -max_code, max_code);
      x[i] = round_code(q) * s;
    }
  }
}
}  // namespace

float round_to_e4m3(float q) {
  // Normal range (|q| >= 2^-6): keep 3 mantissa bits, round to nearest even on the bits (a
  // carry into the exponent is the right result). Below: multiples of 2^-9, rounded to
  // nearest even by adding and subtracting 1.5 * 2^23 (after scaling by 2^9).
  const uint32_t bits = std::bit_cast<uint32_t>(q);
  const uint32_t rounded = (bits + 0x7FFFFu + ((bits >> 20) & 1u)) & 0xFFF00000u;
  const float normal = std::bit_cast<float>(rounded);
  constexpr float kMagic = 0x1.8p23f;
  const float sub = std::copysign((std::fabs(q) * 0x1p9f + kMagic - kMagic) * 0x1p-9f, q);
  const float r = std::fabs(q) >= 0x1p-6f ? normal : sub;
  return q != q ? q : r;  // NaN stays NaN
}

float round_to_e2m1(float q) {
  // The grid {0, 0.5, 1, 1.5, 2, 3, 4, 6} as a sum of steps, one per decision point (the
  // midpoints between neighbours; at a midpoint the even code wins: > where the lower
  // neighbour's code is even, >= where it is odd). Every partial sum is exact.
  const float a = std::fabs(q);
  const float r = (a > 0.25f ? 0.5f : 0.0f) + (a >= 0.75f ? 0.5f : 0.0f) +
                  (a > 1.25f ? 0.5f : 0.0f) + (a >= 1.75f ? 0.5f : 0.0f) +
                  (a > 2.5f ? 1.0f : 0.0f) + (a >= 3.5f ? 1.0f : 0.0f) + (a > 5.0f ? 2.0f : 0.0f);
  return q != q ? 0.0f : std::copysign(r, q);
}

void round_fp8_blocks(float* x, int64_t n, int64_t block) {
  round_blocks(x, n, block, 448.0f, 1e-4f, round_to_e4m3);
}

void round_fp4_blocks(float* x, int64_t n, int64_t block) {
  round_blocks(x, n, block, 6.0f, 6.0f * std::ldexp(1.0f, -126), round_to_e2m1);
}

}  // namespace flint::kernels
