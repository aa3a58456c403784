// Every code point of bf16, FP8 E4M3FN, E8M0 and FP4 E2M1 against the definitions in
// format_reference.h, plus rounding (ties to even at every midpoint), saturation and NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "format_reference.h"
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"

namespace flint {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Equal as values, with NaN equal to NaN and the sign of zero significant.
::testing::AssertionResult same_value(float actual, double expected) {
  if (std::isnan(expected)
          ? std::isnan(actual)
          : (actual == expected && std::signbit(actual) == std::signbit(expected))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << actual << " != " << expected;
}

// Checks `encode` at the midpoint between consecutive codes lo < hi (same sign, |lo| < |hi|):
// the midpoint goes to the even code, and one float step either side to the nearer code.
template <typename Encode>
void check_midpoint(Encode encode, double lo_value, double hi_value, uint32_t lo, uint32_t hi) {
  const float mid = static_cast<float>((lo_value + hi_value) / 2);
  ASSERT_EQ(static_cast<double>(mid), (lo_value + hi_value) / 2) << "midpoint not exact";
  EXPECT_EQ(encode(mid), (lo % 2 == 0) ? lo : hi) << "tie at " << mid;
  const float toward_lo = std::nextafter(mid, static_cast<float>(lo_value));
  const float toward_hi = std::nextafter(mid, static_cast<float>(hi_value));
  EXPECT_EQ(encode(toward_lo), lo) << toward_lo;
  EXPECT_EQ(encode(toward_hi), hi) << toward_hi;
}

TEST(Bf16, EveryCodeDecodesToItsDefinition) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    ASSERT_TRUE(same_value(bf16_to_float(static_cast<uint16_t>(c)), reference::bf16(c))) << c;
  }
}

TEST(Bf16, EncodeInvertsDecodeAndKeepsNaN) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const float value = bf16_to_float(static_cast<uint16_t>(c));
    const uint16_t back = float_to_bf16(value);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(back))) << c;
      EXPECT_EQ(back & 0x8000, c & 0x8000) << "sign of NaN " << c;
      EXPECT_TRUE(back & 0x0040) << "quiet bit " << c;
    } else {
      ASSERT_EQ(back, c);
    }
  }
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7F800001u)) & 0x7FC0, 0x7FC0);  // sNaN -> qNaN
}

TEST(Bf16, MidpointsRoundToEven) {
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t c = 0; c < 0x7F7F; ++c) {
      auto encode = [](float x) { return static_cast<uint32_t>(float_to_bf16(x)); };
      check_midpoint(encode, reference::bf16(sign | c), reference::bf16(sign | (c + 1)), sign | c,
                     sign | (c + 1));
    }
  }
}

TEST(Bf16, OverflowRoundsToInfinity) {
  EXPECT_EQ(float_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(float_to_bf16(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // beyond max + half ulp
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7F7F7FFFu)), 0x7F7F);  // just below the tie
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

TEST(Fp8E4M3, EveryCodeDecodesToItsDefinition) {
  const float* table = fp8_e4m3_table();
  for (uint32_t c = 0; c < 256; ++c) {
    EXPECT_TRUE(same_value(fp8_e4m3_to_float(static_cast<uint8_t>(c)), reference::fp8_e4m3(c)))
        << c;
    EXPECT_EQ(std::bit_cast<uint32_t>(table[c]),
              std::bit_cast<uint32_t>(fp8_e4m3_to_float(static_cast<uint8_t>(c))));
  }
  EXPECT_EQ(fp8_e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7F)) && std::isnan(fp8_e4m3_to_float(0xFF)));
}

TEST(Fp8E4M3, EncodeInvertsDecode) {
  for (uint32_t c = 0; c < 256; ++c) {
    if (c == 0x7F || c == 0xFF) continue;
    EXPECT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(static_cast<uint8_t>(c))), c);
  }
}

TEST(Fp8E4M3, MidpointsRoundToEven) {
  auto encode = [](float x) { return static_cast<uint32_t>(float_to_fp8_e4m3(x)); };
  for (uint32_t sign : {0u, 0x80u}) {
    for (uint32_t c = 0; c < 0x7E; ++c) {
      check_midpoint(encode, reference::fp8_e4m3(sign | c), reference::fp8_e4m3(sign | (c + 1)),
                     sign | c, sign | (c + 1));
    }
  }
}

// Nearest finite code by exhaustive search, ties to the even code, saturating.
uint8_t fp8_nearest(float x) {
  const double a = std::fabs(static_cast<double>(x));
  uint32_t best = 0;
  for (uint32_t c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(reference::fp8_e4m3(c) - a),
                 best_d = std::fabs(reference::fp8_e4m3(best) - a);
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c;
  }
  return static_cast<uint8_t>((std::signbit(x) ? 0x80 : 0) | best);
}

TEST(Fp8E4M3, RandomValuesMatchExhaustiveNearest) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> exponent(-14, 10);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  for (int i = 0; i < 20000; ++i) {
    float x = std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1.0f : 1.0f);
    ASSERT_EQ(float_to_fp8_e4m3(x), fp8_nearest(x)) << x;
  }
}

TEST(Fp8E4M3, SaturatesAndKeepsNaNSignAndNegativeZero) {
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7E);  // the tie with the missing 480
  EXPECT_EQ(float_to_fp8_e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::max()), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(kInf), 0x7E);
  EXPECT_EQ(float_to_fp8_e4m3(-kInf), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(-500.0f), 0xFE);
  EXPECT_EQ(float_to_fp8_e4m3(kNaN), 0x7F);
  EXPECT_EQ(float_to_fp8_e4m3(-kNaN), 0xFF);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-10f), 0x00);  // tie between 0 and 2^-9: even
  EXPECT_EQ(float_to_fp8_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(-std::numeric_limits<float>::denorm_min()), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(0x1.ep-7f), 0x08);  // 15/16 * 2^-6 rounds up into the normals
}

TEST(E8M0, EveryCodeDecodesToItsDefinition) {
  for (uint32_t c = 0; c < 256; ++c) {
    EXPECT_TRUE(same_value(e8m0_to_float(static_cast<uint8_t>(c)), reference::e8m0(c))) << c;
  }
  EXPECT_EQ(std::fpclassify(e8m0_to_float(0)), FP_SUBNORMAL);
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
}

TEST(E8M0, EncodeInvertsDecode) {
  for (uint32_t c = 0; c < 255; ++c) {
    const float value = e8m0_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(float_to_e8m0(value), c);
    EXPECT_EQ(float_to_e8m0_ceil(value), c);
    EXPECT_EQ(float_to_e8m0_ceil(-value), c);
  }
}

TEST(E8M0, CeilIsTheSmallestPowerAtLeastX) {
  for (uint32_t c = 1; c < 255; ++c) {
    const float lower = e8m0_to_float(static_cast<uint8_t>(c - 1));
    const float upper = e8m0_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(float_to_e8m0_ceil(std::nextafter(lower, kInf)), c);
    EXPECT_EQ(float_to_e8m0_ceil((lower + upper) / 2), c);
    EXPECT_EQ(float_to_e8m0_ceil(std::nextafter(upper, 0.0f)), c);
  }
  EXPECT_EQ(float_to_e8m0_ceil(0.0f), 0);
  EXPECT_EQ(float_to_e8m0_ceil(std::numeric_limits<float>::denorm_min()), 0);
  EXPECT_EQ(float_to_e8m0_ceil(0x1.8p127f), 255);  // above 2^127: no scale covers it
  EXPECT_EQ(float_to_e8m0_ceil(kInf), 255);
  EXPECT_EQ(float_to_e8m0_ceil(kNaN), 255);
  EXPECT_EQ(float_to_e8m0_ceil(3.0f), 129);  // 3 -> 4 = 2^2
}

TEST(E8M0, NearestRoundsTiesUp) {
  for (uint32_t c = 1; c < 255; ++c) {
    const float lower = e8m0_to_float(static_cast<uint8_t>(c - 1));
    const float tie = lower * 1.5f;
    EXPECT_EQ(float_to_e8m0(tie), c) << c;
    EXPECT_EQ(float_to_e8m0(std::nextafter(tie, 0.0f)), c - 1) << c;
  }
  EXPECT_EQ(float_to_e8m0(0.0f), 0);
  EXPECT_EQ(float_to_e8m0(0x1.8p127f), 255);
  EXPECT_EQ(float_to_e8m0(kNaN), 255);
}

TEST(Fp4E2M1, EveryCodeDecodesToItsDefinition) {
  const double expected[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 16; ++c) {
    EXPECT_TRUE(same_value(fp4_e2m1_to_float(static_cast<uint8_t>(c)), reference::fp4_e2m1(c)));
    EXPECT_EQ(std::fabs(fp4_e2m1_to_float(static_cast<uint8_t>(c))), expected[c & 7]);
    EXPECT_EQ(fp4_e2m1_table()[c], fp4_e2m1_to_float(static_cast<uint8_t>(c)));
    EXPECT_EQ(fp4_e2m1_to_float(static_cast<uint8_t>(c | 0xF0)),
              fp4_e2m1_to_float(static_cast<uint8_t>(c)));  // high bits ignored
  }
  EXPECT_TRUE(std::signbit(fp4_e2m1_to_float(8)));
}

TEST(Fp4E2M1, EncodeInvertsDecodeAndRoundsTiesToEven) {
  for (uint32_t c = 0; c < 16; ++c) EXPECT_EQ(float_to_fp4_e2m1(fp4_e2m1_to_float(c)), c);
  auto encode = [](float x) { return static_cast<uint32_t>(float_to_fp4_e2m1(x)); };
  for (uint32_t sign : {0u, 8u}) {
    for (uint32_t c = 0; c < 7; ++c) {
      check_midpoint(encode, reference::fp4_e2m1(sign | c), reference::fp4_e2m1(sign | (c + 1)),
                     sign | c, sign | (c + 1));
    }
  }
}

TEST(Fp4E2M1, SaturatesAndMapsNaNToZero) {
  EXPECT_EQ(float_to_fp4_e2m1(6.5f), 7);
  EXPECT_EQ(float_to_fp4_e2m1(1e30f), 7);
  EXPECT_EQ(float_to_fp4_e2m1(kInf), 7);
  EXPECT_EQ(float_to_fp4_e2m1(-kInf), 15);
  EXPECT_EQ(float_to_fp4_e2m1(kNaN), 0);
  EXPECT_EQ(float_to_fp4_e2m1(-kNaN), 0);
  EXPECT_EQ(float_to_fp4_e2m1(-0.0f), 8);
  EXPECT_EQ(float_to_fp4_e2m1(-0.1f), 8);
}

TEST(Fp4E2M1, PackPutsTheEvenElementInTheLowNibble) {
  EXPECT_EQ(pack_fp4(0x3, 0xA), 0xA3);
  EXPECT_EQ(pack_fp4(0xF3, 0x1A), 0xA3);  // extra bits dropped
  const uint8_t byte = pack_fp4(float_to_fp4_e2m1(1.5f), float_to_fp4_e2m1(-4.0f));
  EXPECT_EQ(fp4_e2m1_to_float(byte & 0xF), 1.5f);
  EXPECT_EQ(fp4_e2m1_to_float(byte >> 4), -4.0f);
}

}  // namespace
}  // namespace flint
