// E8M0 (OCP "UE8M0"): an unsigned 8-bit power-of-two scale, value 2^(e - 127).
//
// Codes 0..254 cover 2^-127 .. 2^127 (code 0 is a float32 subnormal, still exact); code
// 255 is NaN. There is no zero, sign or infinity. Used as the block scales of FP8 weights
// (one per 128x128 block) and MXFP4 weights (one per 32 inputs).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace flint {

inline float e8m0_to_float(uint8_t code) {
  if (code == 0xFF) return std::bit_cast<float>(0x7FC00000u);
  if (code == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127: subnormal 2^22 * 2^-149
  return std::bit_cast<float>(static_cast<uint32_t>(code) << 23);
}

// The smallest power of two >= |x|, as a code (how scales are chosen when quantising).
// |x| <= 2^-127 (including 0) gives code 0. NaN, infinity and |x| > 2^127 give 255 (NaN):
// no representable scale covers them.
inline uint8_t float_to_e8m0_ceil(float x) {
  const uint32_t abs_bits = std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu;
  if (abs_bits >= 0x7F800000u) return 0xFF;  // inf or NaN
  if (abs_bits <= 0x00400000u) return 0;     // <= 2^-127
  if (abs_bits < 0x00800000u) return 1;      // subnormal above 2^-127: 2^-126
  const uint32_t exponent = abs_bits >> 23;  // value in [2^(exponent-127), 2^(exponent-126))
  const uint32_t code = exponent + ((abs_bits & 0x7FFFFFu) != 0 ? 1u : 0u);
  return code > 254 ? 0xFF : static_cast<uint8_t>(code);
}

// Nearest power of two to |x| by value (ties, at 1.5 * 2^k, go up), as a code: exact for
// every power of two in [2^-127, 2^127]. 0 and values below 2^-127 give code 0; NaN,
// infinity and values that round above 2^127 give 255 (NaN).
inline uint8_t float_to_e8m0(float x) {
  const uint32_t abs_bits = std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu;
  if (abs_bits >= 0x7F800000u) return 0xFF;
  if (abs_bits < 0x00600000u) return 0;  // below 1.5 * 2^-127
  if (abs_bits < 0x00800000u) return 1;  // subnormals from 1.5 * 2^-127 up: 2^-126
  const uint32_t exponent = abs_bits >> 23;
  const uint32_t code = exponent + ((abs_bits & 0x7FFFFFu) >= 0x400000u ? 1u : 0u);
  return code > 254 ? 0xFF : static_cast<uint8_t>(code);
}

// Whether none of `count` codes is 0 (a subnormal scale) or 255 (NaN): the codes whose
// float is not simply code << 23, which kernels must treat specially. Eight codes a step.
inline bool e8m0_codes_regular(const uint8_t* codes, uint64_t count) {
  // A zero byte of v (code 0) or of ~v (code 255) sets that byte's top bit.
  const auto has_zero_byte = [](uint64_t v) {
    return (v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull;
  };
  uint64_t i = 0, found = 0;
  for (; i + 8 <= count; i += 8) {
    uint64_t v;
    std::memcpy(&v, codes + i, 8);
    found |= has_zero_byte(v) | has_zero_byte(~v);
  }
  for (; i < count; ++i) found |= codes[i] == 0 || codes[i] == 255;
  return found == 0;
}

}  // namespace flint
