// matmul in every weight format against dequantise-then-multiply in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/rng.h"
#include "base/thread_pool.h"
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "kernels/matmul.h"

namespace flint::kernels {
namespace {

struct Owned {
  std::vector<uint8_t> data, scale;
  WeightMatrix w;
};

Owned make(WeightFormat format, int64_t rows, int64_t cols, uint64_t seed,
           DType scale_dtype = DType::F8_E8M0) {
  Rng rng(seed);
  Owned o;
  o.w.format = format;
  o.w.rows = rows;
  o.w.cols = cols;
  o.w.scale_dtype = scale_dtype;
  switch (format) {
    case WeightFormat::kF32: {
      o.data.resize(size_t(rows * cols) * 4);
      auto* f = reinterpret_cast<float*>(o.data.data());
      for (int64_t i = 0; i < rows * cols; ++i) f[i] = float(rng.normal());
      break;
    }
    case WeightFormat::kBF16: {
      o.data.resize(size_t(rows * cols) * 2);
      auto* h = reinterpret_cast<uint16_t*>(o.data.data());
      for (int64_t i = 0; i < rows * cols; ++i) h[i] = float_to_bf16(float(rng.normal()));
      break;
    }
    case WeightFormat::kFp8Block128: {
      o.data.resize(size_t(rows * cols));
      for (auto& b : o.data) b = float_to_fp8_e4m3(float(rng.normal() * 100));
      int64_t nb = ((rows + 127) / 128) * ((cols + 127) / 128);
      if (scale_dtype == DType::F32) {
        o.scale.resize(size_t(nb) * 4);
        auto* s = reinterpret_cast<float*>(o.scale.data());
        for (int64_t i = 0; i < nb; ++i) s[i] = float(rng.uniform() * 0.01 + 0.001);
      } else {
        o.scale.resize(size_t(nb));
        for (auto& s : o.scale) s = uint8_t(120 + rng.below(5));
      }
      break;
    }
    case WeightFormat::kFp4Mx32: {
      o.data.resize(size_t(rows * cols / 2));
      for (auto& b : o.data) b = uint8_t(rng.below(256));
      o.scale.resize(size_t(rows * cols / 32));
      for (auto& s : o.scale) s = uint8_t(122 + rng.below(6));
      break;
    }
  }
  o.w.data = reinterpret_cast<const std::byte*>(o.data.data());
  o.w.scale = o.scale.empty() ? nullptr : reinterpret_cast<const std::byte*>(o.scale.data());
  return o;
}

// Element (r, c) from the format's definition, independently of dequantize_rows.
double element(const Owned& o, int64_t r, int64_t c) {
  const WeightMatrix& w = o.w;
  switch (w.format) {
    case WeightFormat::kF32:
      return reinterpret_cast<const float*>(o.data.data())[r * w.cols + c];
    case WeightFormat::kBF16: {
      uint32_t bits = uint32_t(reinterpret_cast<const uint16_t*>(o.data.data())[r * w.cols + c])
                      << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case WeightFormat::kFp8Block128: {
      int64_t bc = (w.cols + 127) / 128;
      double s = w.scale_dtype == DType::F32
                     ? reinterpret_cast<const float*>(o.scale.data())[(r / 128) * bc + c / 128]
                     : std::ldexp(1.0, int(o.scale[size_t((r / 128) * bc + c / 128)]) - 127);
      uint8_t code = o.data[size_t(r * w.cols + c)];
      int sign = code >> 7, e = (code >> 3) & 15, m = code & 7;
      double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1 + m / 8.0, e - 7);
      return (sign ? -v : v) * s;
    }
    case WeightFormat::kFp4Mx32: {
      uint8_t byte = o.data[size_t((r * w.cols + c) / 2)];
      uint8_t nib = (c % 2 == 0) ? (byte & 15) : (byte >> 4);
      static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
      double v = (nib & 8) ? -mag[nib & 7] : mag[nib & 7];
      return v * std::ldexp(1.0, int(o.scale[size_t(r * (w.cols / 32) + c / 32)]) - 127);
    }
  }
  return 0;
}

void check(const Owned& o, int64_t n) {
  Rng rng(99);
  std::vector<float> x(size_t(n * o.w.cols));
  for (auto& v : x) v = float(rng.normal());
  std::vector<float> y(size_t(n * o.w.rows));
  matmul(o.w, x.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < o.w.rows; ++r) {
      double acc = 0, mag = 0;
      for (int64_t c = 0; c < o.w.cols; ++c) {
        double e = element(o, r, c);
        acc += e * x[size_t(i * o.w.cols + c)];
        mag += std::fabs(e * x[size_t(i * o.w.cols + c)]);
      }
      EXPECT_NEAR(y[size_t(i * o.w.rows + r)], acc, 1e-6 * mag + 1e-30)
          << "row " << r << " input " << i;
    }
  }
}

TEST(Matmul, EveryFormatMatchesDefinition) {
  for (int64_t n : {1, 3}) {
    check(make(WeightFormat::kF32, 37, 70, 1), n);
    check(make(WeightFormat::kBF16, 40, 96, 2), n);
    check(make(WeightFormat::kFp8Block128, 200, 300, 3), n);  // partial 128-blocks
    check(make(WeightFormat::kFp8Block128, 130, 256, 4, DType::F32), n);
    check(make(WeightFormat::kFp4Mx32, 33, 128, 5), n);
  }
}

TEST(Matmul, ResultDoesNotDependOnThreadCount) {
  Owned o = make(WeightFormat::kFp8Block128, 256, 384, 6);
  std::vector<float> x(384 * 2, 0.5f);
  std::vector<float> y1(512), y4(512);
  set_thread_count(1);
  matmul(o.w, x.data(), 2, y1.data());
  set_thread_count(4);
  matmul(o.w, x.data(), 2, y4.data());
  set_thread_count(0);
  EXPECT_EQ(y1, y4);
}

TEST(Matmul, RowSliceSelectsRows) {
  Owned o = make(WeightFormat::kFp8Block128, 384, 128, 7);
  WeightMatrix part = o.w.row_slice(128, 256);
  std::vector<float> full(384 * 128), rows(128 * 128);
  o.w.dequantize_rows(0, 384, full.data());
  part.dequantize_rows(0, 128, rows.data());
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), full.begin() + 128 * 128));
}

}  // namespace
}  // namespace flint::kernels
