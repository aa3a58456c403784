// FP4 E2M1: 1 sign bit (bit 3), 2 exponent bits (bias 1), 1 mantissa bit. Codes 0..7 are
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}; code | 8 is the negative (8 is -0). No NaN, no infinity.
//
// Packed two per byte: the LOW nibble holds the even element, the high nibble the odd one
// (DeepSeek's I8 [out, in/2] expert weights).
//
// Encoding rounds to nearest with ties to the even mantissa (an even code), saturates to
// +-6 (infinities included). NaN has no code: it encodes as +0 (code 0), so that a NaN
// contributes nothing to a dot product rather than the largest value; callers that must
// detect NaN check before encoding.
#pragma once

#include <bit>
#include <cstdint>

namespace flint {

inline constexpr float kFp4E2M1Max = 6.0f;

// The 16 decoded values, index = nibble.
inline constexpr float kFp4E2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                                             4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                                             -2.0f, -3.0f, -4.0f, -6.0f};
inline const float* fp4_e2m1_table() { return kFp4E2M1Values; }

// Value of a nibble (bits above 3 are ignored).
inline float fp4_e2m1_to_float(uint8_t nibble) { return kFp4E2M1Values[nibble & 0xFu]; }

inline uint8_t float_to_fp4_e2m1(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return 0;  // NaN -> +0 (see above)
  const uint8_t sign = static_cast<uint8_t>((bits >> 28) & 0x8u);
  const float a = std::bit_cast<float>(abs_bits);
  // Decision points are the midpoints between neighbours; at a midpoint the even code wins
  // (<= rounds down to an even code, < rounds down to an odd one).
  uint8_t code;
  if (a <= 0.25f)
    code = 0;
  else if (a < 0.75f)
    code = 1;
  else if (a <= 1.25f)
    code = 2;
  else if (a < 1.75f)
    code = 3;
  else if (a <= 2.5f)
    code = 4;
  else if (a < 3.5f)
    code = 5;
  else if (a <= 5.0f)
    code = 6;
  else
    code = 7;  // saturates: everything above 5 (infinity included) is 6
  return sign | code;
}

// One byte holding two nibbles: `even` in bits 0..3, `odd` in bits 4..7.
inline uint8_t pack_fp4(uint8_t even, uint8_t odd) {
  return static_cast<uint8_t>((even & 0xFu) | ((odd & 0xFu) << 4));
}

}  // namespace flint
