// bfloat16: the upper 16 bits of an IEEE float32 (1 sign, 8 exponent, 7 mantissa bits).
//
// Decoding is exact (a shift). Encoding rounds to nearest, ties to even; finite values
// beyond the largest bf16 round to infinity as IEEE rounding does; infinities stay
// infinities; a NaN stays a quiet NaN with its sign (the quiet bit is forced so that
// truncating a signalling NaN's payload can never produce an infinity).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace flint {

inline float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

// out[i] = bf16_to_float(in[i]) for i < n. Vectorisable.
inline void bf16_to_float_n(const uint16_t* in, std::size_t n, float* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}

}  // namespace flint
