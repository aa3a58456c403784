// The activation roundings against a brute-force definition: the scale is the smallest
// power of two >= amax / max_code, and each value becomes the representable code nearest
// to x / scale (ties to the even code), found by searching every code of the format.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "base/rng.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "kernels/quant_round.h"

namespace flint::kernels {
namespace {

// Every finite non-negative value of the format, ascending, with its code's parity.
struct Grid {
  std::vector<double> values;
  std::vector<int> mantissa_parity;
};

Grid e4m3_grid() {  // sign-less E4M3FN: exponent bias 7, 3 mantissa bits, 0x7F is NaN
  Grid g;
  for (int code = 0; code < 0x7F; ++code) {
    int e = code >> 3, m = code & 7;
    double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    g.values.push_back(v);
    g.mantissa_parity.push_back(code & 1);
  }
  return g;
}

Grid e2m1_grid() {
  Grid g;
  g.values = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  g.mantissa_parity = {0, 1, 0, 1, 0, 1, 0, 1};
  return g;
}

double nearest(const Grid& g, double x) {
  double a = std::fabs(x);
  size_t best = 0;
  for (size_t i = 1; i < g.values.size(); ++i) {
    double d = std::fabs(g.values[i] - a), db = std::fabs(g.values[best] - a);
    if (d < db || (d == db && g.mantissa_parity[i] == 0)) best = i;
  }
  return std::copysign(g.values[best], x);
}

double pow2_at_least(double v) {
  double s = 1.0;
  while (s < v) s *= 2;
  while (s / 2 >= v) s /= 2;
  return s;
}

void check(const std::vector<float>& in, const std::vector<float>& out, int64_t block,
           double max_code, double floor_amax, const Grid& grid) {
  for (size_t b = 0; b < in.size(); b += static_cast<size_t>(block)) {
    double amax = floor_amax;
    for (int64_t i = 0; i < block; ++i) amax = std::max(amax, double(std::fabs(in[b + i])));
    double s = pow2_at_least(float(amax) * float(1.0 / max_code));
    for (int64_t i = 0; i < block; ++i) {
      double q = std::clamp(double(in[b + i]) / s, -max_code, max_code);
      EXPECT_EQ(out[b + i], float(nearest(grid, q) * s)) << "value " << in[b + i] << " scale " << s;
    }
  }
}

TEST(QuantRound, Fp8BlocksMatchDefinition) {
  Rng rng(11);
  for (double magnitude : {1e-6, 0.01, 1.0, 37.0, 5000.0}) {
    std::vector<float> x(64 * 8);
    for (auto& v : x) v = float(rng.normal() * magnitude);
    x[3] = 0.0f;
    auto y = x;
    round_fp8_blocks(y.data(), int64_t(y.size()), 64);
    check(x, y, 64, 448.0, 1e-4, e4m3_grid());
    auto z = x;
    round_fp8_blocks(z.data(), int64_t(z.size()), 128);
    check(x, z, 128, 448.0, 1e-4, e4m3_grid());
    auto small = x;  // blocks shorter than the 8 partial maxima
    round_fp8_blocks(small.data(), int64_t(small.size()), 4);
    check(x, small, 4, 448.0, 1e-4, e4m3_grid());
  }
}

TEST(QuantRound, Fp4BlocksMatchDefinition) {
  Rng rng(12);
  for (double magnitude : {1e-30, 0.02, 1.0, 300.0}) {
    std::vector<float> x(32 * 6);
    for (auto& v : x) v = float(rng.normal() * magnitude);
    auto y = x;
    round_fp4_blocks(y.data(), int64_t(y.size()), 32);
    check(x, y, 32, 6.0, 6.0 * std::ldexp(1.0, -126), e2m1_grid());
  }
}

// round(q) against codec(q) bit for bit on every float32 q with |q| <= limit whose low
// `zero_bits` bits are zero; returns how many were checked.
template <class Round, class Codec>
int64_t check_against_codec(int zero_bits, float limit, Round round, Codec codec) {
  int64_t checked = 0;
  for (uint32_t hi = 0; hi < (1u << (32 - zero_bits)); ++hi) {  // the sign included
    const float q = std::bit_cast<float>(hi << zero_bits);
    if (!(std::fabs(q) <= limit)) continue;
    const uint32_t got = std::bit_cast<uint32_t>(round(q)),
                   want = std::bit_cast<uint32_t>(codec(q));
    EXPECT_EQ(got, want) << q;
    if (got != want) return -1;
    ++checked;
  }
  return checked;
}

// The branch-free E4M3 rounding against the codec, on every float32 in [-448, 448] whose low
// 12 bits are zero (1.1 million values; every E4M3 rounding boundary and its neighbours are
// among them: boundaries lie on multiples of 2^-10 below 2^-6 and on 4-bit mantissas
// above, and 11 mantissa bits tell ties from values past them), plus NaN.
TEST(QuantRound, BranchFreeE4m3RoundingMatchesCodec) {
  const int64_t checked = check_against_codec(
      12, 448.0f, round_to_e4m3, [](float q) { return fp8_e4m3_to_float(float_to_fp8_e4m3(q)); });
  EXPECT_EQ(checked, 2 * ((0x43E00000 >> 12) + 1));
  EXPECT_TRUE(std::isnan(round_to_e4m3(std::bit_cast<float>(0x7FC00001u))));
}

// The same for E2M1, on every float32 in [-8, 8] whose low 8 bits are zero (the decision
// points 0.25, 0.75, ..., 5 and their neighbours are among them; beyond 6 the caller clamps,
// but the codec saturates and so must this), zeros, and NaN (+0, as the codec).
TEST(QuantRound, BranchFreeE2m1RoundingMatchesCodec) {
  const int64_t checked = check_against_codec(
      8, 8.0f, round_to_e2m1, [](float q) { return fp4_e2m1_to_float(float_to_fp4_e2m1(q)); });
  EXPECT_EQ(checked, 2 * ((0x41000000 >> 8) + 1));
  EXPECT_EQ(std::bit_cast<uint32_t>(round_to_e2m1(std::bit_cast<float>(0xFFC00001u))), 0u);
}

TEST(QuantRound, PowerOfTwoScale) {
  EXPECT_EQ(pow2_scale(448.0f, 448.0f), 1.0f);  // exact power of two stays
  EXPECT_EQ(pow2_scale(449.0f, 448.0f), 2.0f);  // just above rounds up
  EXPECT_EQ(pow2_scale(6.0f, 6.0f), 1.0f);
  EXPECT_EQ(pow2_scale(3.0f, 6.0f), 0.5f);
  EXPECT_EQ(pow2_scale(1e-4f, 448.0f), std::ldexp(1.0f, -22));  // the FP8 floor
}

}  // namespace
}  // namespace flint::kernels
