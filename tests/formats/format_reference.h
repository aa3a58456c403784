// Independent definitions of the number formats, written from their specifications
// (sign, exponent, mantissa) in double precision, to test flint's fast versions against.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace flint::reference {

inline double bf16(uint16_t c) {
  const double sign = (c >> 15) ? -1.0 : 1.0;
  const int e = (c >> 7) & 0xFF, m = c & 0x7F;
  if (e == 0xFF) return m == 0 ? sign * INFINITY : std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(m, -126 - 7);
  return sign * std::ldexp(128 + m, e - 127 - 7);
}

inline double fp8_e4m3(uint8_t c) {
  const double sign = (c >> 7) ? -1.0 : 1.0;
  const int e = (c >> 3) & 0xF, m = c & 0x7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(m, -6 - 3);
  return sign * std::ldexp(8 + m, e - 7 - 3);
}

inline double e8m0(uint8_t c) {
  if (c == 255) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, c - 127);
}

inline double fp4_e2m1(uint8_t c) {
  const double sign = (c >> 3) & 1 ? -1.0 : 1.0;
  const int e = (c >> 1) & 0x3, m = c & 0x1;
  if (e == 0) return sign * 0.5 * m;
  return sign * std::ldexp(2 + m, e - 1 - 1);
}

}  // namespace flint::reference
