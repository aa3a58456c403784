#include "kernels/quant_round.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "formats/fp4.h"
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
    float amax = 0.0f;
    for (int64_t i = b; i < b + block; ++i) amax = std::max(amax, std::fabs(x[i]));
    amax = std::max(amax, amax_floor);
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

void round_fp8_blocks(float* x, int64_t n, int64_t block) {
  round_blocks(x, n, block, 448.0f, 1e-4f, round_to_e4m3);
}

void round_fp4_blocks(float* x, int64_t n, int64_t block) {
  round_blocks(x, n, block, 6.0f, 6.0f * std::ldexp(1.0f, -126),
               [](float q) { return fp4_e2m1_to_float(float_to_fp4_e2m1(q)); });
}

}  // namespace flint::kernels
