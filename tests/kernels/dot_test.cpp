// dot() against its documented summation order written out here with std::fma, and the
// per-head forms against dot() and a plain loop: bit for bit, since attention's prefill,
// incremental decode and any head or thread split must agree exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/rng.h"
#include "kernels/dot.h"

namespace flint::kernels {
namespace {

std::vector<float> random_vector(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// dot.h's order: 16 lanes of fused multiply-add chains, even lanes, odd lanes, then both.
float dot_by_definition(const float* a, const float* b, int64_t n) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] = std::fma(a[i], b[i], lane[i % 16]);
  float even = 0.f, odd = 0.f;
  for (int j = 0; j < 16; j += 2) {
    even += lane[j];
    odd += lane[j + 1];
  }
  return even + odd;
}

TEST(Dot, FollowsItsSummationOrder) {
  for (int64_t n : {1, 15, 16, 17, 100, 128, 512, 531}) {
    const auto a = random_vector(n, 1), b = random_vector(n, 2);
    EXPECT_EQ(bits(dot(a.data(), b.data(), n)), bits(dot_by_definition(a.data(), b.data(), n)))
        << "n=" << n;
  }
}

TEST(HeadDots, EachIsDotBitForBit) {
  for (int64_t heads : {1, 3, 4, 7, 8, 11, 15, 16}) {
    for (int64_t dim : {100, 128, 512}) {
      const int64_t count = 37, ldo = count + 5;
      const auto q = random_vector(heads * dim, 3 + heads), k = random_vector(count * dim, 4);
      std::vector<const float*> keys;
      for (int64_t e = 0; e < count; ++e) keys.push_back(k.data() + e * dim);
      std::vector<float> out(static_cast<size_t>(heads * ldo), -1.f);
      head_dots(q.data(), heads, keys.data(), count, dim, out.data(), ldo);
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t e = 0; e < count; ++e) {
          ASSERT_EQ(bits(out[h * ldo + e]), bits(dot(q.data() + h * dim, keys[e], dim)))
              << "heads=" << heads << " dim=" << dim << " h=" << h << " key=" << e;
        }
        for (int64_t e = count; e < ldo; ++e) EXPECT_EQ(out[h * ldo + e], -1.f);  // untouched
      }
    }
  }
}

TEST(HeadWeightedSums, EachIsAnInOrderFmaChain) {
  for (int64_t heads : {1, 2, 4, 7, 8, 9, 15, 16}) {
    for (int64_t dim : {100, 512}) {
      const int64_t count = 41, ldw = count + 3;
      const auto w = random_vector(heads * ldw, 5), r = random_vector(count * dim, 6);
      const auto start = random_vector(heads * dim, 7);
      std::vector<const float*> rows;
      for (int64_t k = 0; k < count; ++k) rows.push_back(r.data() + k * dim);
      std::vector<float> out = start;
      head_weighted_sums(w.data(), ldw, heads, rows.data(), count, dim, out.data());
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < dim; ++d) {
          float want = start[h * dim + d];
          for (int64_t k = 0; k < count; ++k) want = std::fma(w[h * ldw + k], rows[k][d], want);
          ASSERT_EQ(bits(out[h * dim + d]), bits(want))
              << "heads=" << heads << " dim=" << dim << " h=" << h << " d=" << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace flint::kernels
