// Every kernel against a plain scalar definition written here, independently of the
// kernel's implementation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <numeric>
#include <vector>

#include "base/rng.h"
#include "kernels/activation.h"
#include "kernels/hadamard.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/sinkhorn.h"
#include "kernels/softmax.h"
#include "kernels/topk.h"

namespace flint::kernels {
namespace {

std::vector<float> random_vector(int64_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

TEST(RmsNorm, MatchesDefinition) {
  for (const int64_t dim : {96, 100, 7}) {  // whole groups of 8 partial sums, and tails
    const int64_t n = 3;
    auto x = random_vector(n * dim, 1, 3.0);
    auto w = random_vector(dim, 2);
    std::vector<float> y(x.size()), y_plain(x.size());
    rms_norm(x.data(), w.data(), n, dim, 1e-6f, y.data());
    rms_norm(x.data(), nullptr, n, dim, 1e-6f, y_plain.data());
    for (int64_t r = 0; r < n; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < dim; ++i) ms += double(x[r * dim + i]) * x[r * dim + i];
      double inv = 1.0 / std::sqrt(ms / dim + 1e-6);
      for (int64_t i = 0; i < dim; ++i) {
        EXPECT_NEAR(y[r * dim + i], w[i] * x[r * dim + i] * inv, 1e-5);
        EXPECT_NEAR(y_plain[r * dim + i], x[r * dim + i] * inv, 1e-5);
      }
    }
  }
}

TEST(Rope, RotatesPairsLikeComplexMultiplication) {
  const int64_t dim = 64;
  auto freq = rope_inv_freq(dim, 10000.0);
  for (int64_t i = 0; i < dim / 2; ++i) {
    EXPECT_NEAR(freq[i], std::pow(10000.0, -2.0 * i / dim),
                1e-6 * std::pow(10000.0, -2.0 * i / dim) + 1e-12);
  }
  auto x = random_vector(dim, 3);
  auto y = x;
  std::vector<float> c(dim / 2), s(dim / 2);
  rope_cos_sin(freq, 37, c.data(), s.data());
  apply_rope(y.data(), c.data(), s.data(), dim / 2, false);
  for (int64_t i = 0; i < dim / 2; ++i) {
    std::complex<double> z(x[2 * i], x[2 * i + 1]);
    std::complex<double> r = z * std::polar(1.0, 37.0 * freq[i]);
    EXPECT_NEAR(y[2 * i], r.real(), 1e-5);
    EXPECT_NEAR(y[2 * i + 1], r.imag(), 1e-5);
  }
  apply_rope(y.data(), c.data(), s.data(), dim / 2, true);  // the inverse undoes it
  for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

TEST(Rope, YarnMatchesDefinition) {
  // DeepSeek-V4: dim 64, base 160000, factor 16, original length 65536, beta 32 / 1.
  const int64_t dim = 64;
  const double base = 160000, factor = 16;
  auto f = yarn_inv_freq(dim, base, factor, 65536, 32, 1);
  auto corr = [&](double rot) {
    return dim * std::log(65536 / (rot * 2 * M_PI)) / (2 * std::log(base));
  };
  double low = std::max(0.0, std::floor(corr(32))),
         high = std::min<double>(dim - 1, std::ceil(corr(1)));
  for (int64_t i = 0; i < dim / 2; ++i) {
    double plain = std::pow(base, -2.0 * i / dim);
    double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    double expected = plain / factor * ramp + plain * (1 - ramp);
    EXPECT_NEAR(f[i], expected, 2e-6 * expected) << i;
  }
  // No original length: plain RoPE.
  auto p = yarn_inv_freq(dim, base, factor, 0, 32, 1);
  EXPECT_EQ(p, rope_inv_freq(dim, base));
}

TEST(Softmax, WithSinkMatchesDefinition) {
  auto x = random_vector(17, 4, 2.0);
  const float sink = 0.7f;
  auto y = x;
  softmax_with_sink(y.data(), 17, sink);
  double denom = std::exp(double(sink));
  for (float v : x) denom += std::exp(double(v));
  double total = 0;
  for (int i = 0; i < 17; ++i) {
    EXPECT_NEAR(y[i], std::exp(double(x[i])) / denom, 1e-6);
    total += y[i];
  }
  EXPECT_LT(total, 1.0);  // the sink takes its share
  auto z = x;
  softmax(z.data(), 17);
  EXPECT_NEAR(std::accumulate(z.begin(), z.end(), 0.0), 1.0, 1e-6);
  softmax_with_sink(nullptr, 0, sink);  // empty is fine
}

TEST(Hadamard, MatchesSylvesterMatrix) {
  for (int64_t n : {1, 2, 8, 128}) {
    auto x = random_vector(n, 5);
    auto y = x;
    float scale = 1.0f / std::sqrt(float(n));
    hadamard_transform(y.data(), n, scale);
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j)
        acc += (std::popcount(uint64_t(i & j)) % 2 ? -1.0 : 1.0) * x[j];
      EXPECT_NEAR(y[i], acc * scale, 1e-5) << n << " " << i;
    }
    hadamard_transform(y.data(), n, scale);  // orthogonal and symmetric: its own inverse
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
  }
}

TEST(TopK, MatchesFullSortWithLowIndexTies) {
  std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f, 0.5f, 7.0f, std::nanf("")};
  std::vector<int32_t> out;
  topk(x.data(), 7, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 1, 3, 0}));
  topk(x.data(), 7, 100, out);
  EXPECT_EQ(out.size(), 7u);
  EXPECT_EQ(out.back(), 6);  // NaN last
  auto r = random_vector(1000, 6);
  topk(r.data(), 1000, 50, out);
  std::vector<int32_t> all(1000);
  std::iota(all.begin(), all.end(), 0);
  std::stable_sort(all.begin(), all.end(), [&](int a, int b) { return r[a] > r[b]; });
  EXPECT_EQ(out, std::vector<int32_t>(all.begin(), all.begin() + 50));
}

TEST(SwiGlu, ClampsAsDeepSeekV4) {
  std::vector<float> gate = {-30.f, -1.f, 0.f, 3.f, 12.f, 50.f};
  std::vector<float> up = {5.f, -20.f, 1.f, 2.f, 11.f, -10.5f};
  std::vector<float> out(6);
  swiglu(gate.data(), up.data(), 6, 10.0f, out.data());
  for (int i = 0; i < 6; ++i) {
    double g = std::min(gate[i], 10.f), u = std::clamp(up[i], -10.f, 10.f);
    EXPECT_NEAR(out[i], g / (1 + std::exp(-g)) * u, 1e-5) << i;
  }
  swiglu(gate.data(), up.data(), 6, 0.0f, out.data());  // no limit
  EXPECT_NEAR(out[5], 50.0 * -10.5, 1e-3);
}

TEST(Sinkhorn, MatchesReferenceOrderAndIsDoublyStochastic) {
  const int64_t n = 4;
  auto m = random_vector(n * n, 7, 2.0);
  auto k = m;
  const float eps = 1e-6f;
  sinkhorn(k.data(), n, 20, eps);
  // Plain transcription: softmax over rows + eps, column normalisation, then 19 rounds.
  std::vector<double> r(m.begin(), m.end());
  for (int j = 0; j < n; ++j) {
    double mx = -1e300, s = 0;
    for (int i = 0; i < n; ++i) mx = std::max(mx, r[j * n + i]);
    for (int i = 0; i < n; ++i) s += std::exp(r[j * n + i] - mx);
    for (int i = 0; i < n; ++i) r[j * n + i] = std::exp(r[j * n + i] - mx) / s + eps;
  }
  auto cols = [&] {
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += r[j * n + i];
      for (int j = 0; j < n; ++j) r[j * n + i] /= s + eps;
    }
  };
  auto rows = [&] {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += r[j * n + i];
      for (int i = 0; i < n; ++i) r[j * n + i] /= s + eps;
    }
  };
  cols();
  for (int it = 1; it < 20; ++it) {
    rows();
    cols();
  }
  for (int i = 0; i < n * n; ++i) EXPECT_NEAR(k[i], r[i], 1e-5);
  for (int j = 0; j < n; ++j) {
    double rs = 0, cs = 0;
    for (int i = 0; i < n; ++i) {
      rs += k[j * n + i];
      cs += k[i * n + j];
    }
    EXPECT_NEAR(rs, 1.0, 1e-3);
    EXPECT_NEAR(cs, 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace flint::kernels
