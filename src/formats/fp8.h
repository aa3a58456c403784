// FP8 E4M3FN ("fn": finite, no infinities): 1 sign, 4 exponent (bias 7), 3 mantissa bits.
//
//   exponent 0:      subnormal, (m / 8) * 2^-6, the smallest step being 2^-9
//   exponent 1..15:  (1 + m / 8) * 2^(e - 7); the largest finite value is 448 (0x7E)
//   0x7F and 0xFF:   NaN (the only NaN codes; there is no infinity)
//
// Encoding rounds to nearest, ties to even, and SATURATES: every finite value above 448
// in magnitude and both infinities become +-448. NaN becomes 0x7F with the input's sign
// bit (0xFF for a negative NaN). -0 stays -0 (0x80).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace flint {

inline constexpr float kFp8E4M3Max = 448.0f;

// Computes the value of a code from its fields (the lookup table is built from this). A
// normal code is sign | (exponent + 120) << 23 | mantissa << 20 (rebias 7 -> 127, mantissa
// widened from 3 to 23 bits), a subnormal one m x 2^-9 (exact in float32), 0x7F and 0xFF
// NaN. Selected with masks, not branches, so that loops over codes vectorise (the KV row
// decode, kernels/kv_codec.cpp).
inline float fp8_e4m3_to_float(uint8_t code) {
  const uint32_t magnitude = code & 0x7Fu;
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-9f);
  const uint32_t normal = (magnitude << 20) + (120u << 23);
  const uint32_t is_subnormal = 0u - static_cast<uint32_t>(magnitude < 8);
  const uint32_t is_nan = 0u - static_cast<uint32_t>(magnitude == 0x7Fu);
  uint32_t bits = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  bits = (bits & ~is_nan) | (0x7FC00000u & is_nan);
  return std::bit_cast<float>(sign | bits);
}

// All 256 decoded values, index = code. Built once on first use (thread-safe); hoist the
// call out of inner loops.
inline const float* fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values{};
    for (int code = 0; code < 256; ++code)
      values[code] = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    return values;
  }();
  return table.data();
}

inline uint8_t float_to_fp8_e4m3(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return sign | 0x7Fu;   // NaN
  if (abs_bits >= 0x43E00000u) return sign | 0x7Eu;  // >= 448 (and inf): saturate
  if (abs_bits < 0x3C800000u) {                      // below 2^-6: subnormal range
    // Multiples of 2^-9; the scaled value is < 8 so floor and the remainder are exact.
    const float scaled = std::bit_cast<float>(abs_bits) * 0x1p9f;
    float whole = std::floor(scaled);
    const float rest = scaled - whole;
    uint8_t q = static_cast<uint8_t>(whole);
    if (rest > 0.5f || (rest == 0.5f && (q & 1u))) ++q;  // q == 8 is the code of 2^-6
    return sign | q;
  }
  // Normal range: rebias the exponent, keep 3 of 23 mantissa bits, round to nearest even.
  // A carry out of the mantissa correctly bumps the exponent.
  const uint32_t exponent = (abs_bits >> 23) - 120u;
  uint32_t code = (exponent << 3) | ((abs_bits >> 20) & 0x7u);
  const uint32_t rest = abs_bits & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;
  if (code > 0x7Eu) code = 0x7Eu;  // rounding up past 448 (never reached below 448: safety)
  return static_cast<uint8_t>(sign | code);
}

}  // namespace flint
