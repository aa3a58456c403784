// matmul in every weight format against dequantise-then-multiply in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/rng.h"
#include "base/thread_pool.h"
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "kernels/matmul.h"
#include "kernels/quant_round.h"

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
      if ((code & 0x7F) == 0x7F) return NAN;  // E4M3FN's only NaN codes
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

std::vector<float> random_x(int64_t n, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(size_t(n * cols));
  for (auto& v : x) v = float(rng.normal());
  return x;
}

void check(const Owned& o, int64_t n) {
  std::vector<float> x = random_x(n, o.w.cols, 99);
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
      if (std::isnan(acc)) {
        EXPECT_TRUE(std::isnan(y[size_t(i * o.w.rows + r)])) << "row " << r << " input " << i;
        continue;
      }
      ASSERT_NEAR(y[size_t(i * o.w.rows + r)], acc, 1e-6 * mag + 1e-30)
          << matmul_isa() << " row " << r << " input " << i << " n " << n;
    }
  }
}

// Runs `body` once with every variant this CPU has (avx512, avx2, scalar), then restores
// the default.
template <typename Body>
void for_each_isa(Body body) {
  for (std::string_view isa : matmul_isas()) {
    SCOPED_TRACE(std::string(isa));
    ASSERT_TRUE(set_matmul_isa(isa));
    body();
  }
  set_matmul_isa("");
}

// Tensor parallelism keeps column slices of row-parallel weights as copies (shard.h): each
// format's slice must hold exactly the original's elements, scales included.
TEST(WeightMatrix, CopyColumnsKeepsEveryElement) {
  struct Case {
    WeightFormat format;
    DType scale;
    int64_t rows, cols, c0, c1;
  };
  const Case cases[] = {{WeightFormat::kBF16, DType::F8_E8M0, 5, 70, 3, 41},
                        {WeightFormat::kF32, DType::F8_E8M0, 3, 20, 0, 7},
                        {WeightFormat::kFp8Block128, DType::F8_E8M0, 200, 384, 128, 384},
                        {WeightFormat::kFp8Block128, DType::F32, 130, 300, 128, 300},
                        {WeightFormat::kFp8Block128, DType::F8_E8M0, 129, 512, 0, 256},
                        {WeightFormat::kFp4Mx32, DType::F8_E8M0, 7, 256, 64, 160}};
  for (const Case& k : cases) {
    const Owned o = make(k.format, k.rows, k.cols, 7, k.scale);
    ASSERT_TRUE(o.w.can_cut_columns_at(k.c0) && o.w.can_cut_columns_at(k.c1));
    std::vector<std::byte> storage;
    const WeightMatrix part = o.w.copy_columns(k.c0, k.c1, storage);
    ASSERT_EQ(part.cols, k.c1 - k.c0);
    ASSERT_EQ(part.nbytes(), storage.size());
    std::vector<float> got(size_t(part.rows * part.cols));
    part.dequantize_rows(0, part.rows, got.data());
    for (int64_t r = 0; r < k.rows; ++r) {
      for (int64_t c = 0; c < part.cols; ++c) {
        const double want = element(o, r, k.c0 + c);
        const float g = got[size_t(r * part.cols + c)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(g));
        } else {
          ASSERT_EQ(g, static_cast<float>(want))
              << weight_format_name(k.format) << " row " << r << " col " << c;
        }
      }
    }
  }
  // Cuts inside a scale block are refused.
  const Owned fp8 = make(WeightFormat::kFp8Block128, 128, 256, 1);
  EXPECT_FALSE(fp8.w.can_cut_columns_at(64));
  EXPECT_FALSE(fp8.w.can_cut_rows_at(64));
  EXPECT_TRUE(fp8.w.can_cut_rows_at(128));
  const Owned fp4 = make(WeightFormat::kFp4Mx32, 4, 128, 1);
  EXPECT_FALSE(fp4.w.can_cut_columns_at(48));
  EXPECT_TRUE(fp4.w.can_cut_columns_at(96));
}

// Codes 0 and 255 anywhere (first, inside, in the tail after the last whole 8 bytes) make
// a matrix irregular; formats without E8M0 scales are regular.
TEST(WeightMatrix, MarkRegularScales) {
  Owned fp4 = make(WeightFormat::kFp4Mx32, 3, 96, 1);  // 9 codes: one word and a tail
  fp4.w.mark_regular_scales();
  EXPECT_TRUE(fp4.w.regular_scales);
  for (size_t at : {size_t{0}, size_t{5}, size_t{8}}) {
    for (uint8_t code : {uint8_t{0}, uint8_t{255}}) {
      Owned bad = make(WeightFormat::kFp4Mx32, 3, 96, 1);
      bad.scale[at] = code;
      bad.w.mark_regular_scales();
      EXPECT_FALSE(bad.w.regular_scales) << "code " << int(code) << " at " << at;
    }
  }
  Owned fp8 = make(WeightFormat::kFp8Block128, 300, 1100, 2);  // 3 x 9 codes
  fp8.scale.back() = 255;
  fp8.w.mark_regular_scales();
  EXPECT_FALSE(fp8.w.regular_scales);
  for (const Owned& o : {make(WeightFormat::kFp8Block128, 130, 256, 3, DType::F32),
                         make(WeightFormat::kBF16, 2, 64, 4), make(WeightFormat::kF32, 2, 8, 5)}) {
    WeightMatrix w = o.w;
    w.mark_regular_scales();
    EXPECT_TRUE(w.regular_scales) << weight_format_name(w.format);
  }
}

TEST(Matmul, EveryFormatMatchesDefinition) {
  // n = 1..4 take the decode path, 5..11 the tiled one (every remainder of the AVX-512
  // register tile's 6 inputs); widths cross 512-column blocks, and 70, 300 and 1100 end in
  // partial vectors or partial FP8 blocks. The 200- and 130-row matrices are long enough for
  // the rows prefetched ahead to lie inside them.
  for_each_isa([] {
    for (int64_t n : {1, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
      check(make(WeightFormat::kF32, 37, 70, 1), n);
      check(make(WeightFormat::kBF16, 40, 96, 2), n);
      check(make(WeightFormat::kBF16, 21, 1040, 12), n);
      check(make(WeightFormat::kFp8Block128, 200, 300, 3), n);
      check(make(WeightFormat::kFp8Block128, 130, 1100, 13), n);
      check(make(WeightFormat::kFp8Block128, 130, 256, 4, DType::F32), n);
      check(make(WeightFormat::kFp4Mx32, 33, 128, 5), n);
      check(make(WeightFormat::kFp4Mx32, 19, 1088, 15), n);
    }
  });
}

// Codes and scales at the edges of the formats: FP8 subnormals, NaN codes (0x7F, 0xFF),
// scales of 2^120 and more (decoded element by element: scale * 2^8 would overflow), tiny
// scales, FP4 with the extreme E8M0 scales.
TEST(Matmul, SpecialCodesAndScales) {
  for_each_isa([] {
    Owned fp8 = make(WeightFormat::kFp8Block128, 128, 384, 21);
    for (size_t i = 0; i < fp8.data.size(); i += 3) fp8.data[i] = uint8_t(i % 16);  // subnormals
    fp8.data[5] = 0x7F;                                                             // NaN in row 0
    fp8.data[384 * 7 + 200] = 0xFF;                                                 // NaN in row 7
    fp8.scale = {127 + 8, 127 + 121, 1};  // 2^8, 2^121, 2^-126
    for (size_t r = 0; r < 128; ++r) {    // block 1: codes below 2^-3, so sums stay finite
      for (size_t c = 128; c < 256; ++c) fp8.data[r * 384 + c] &= 0x9F;
    }
    fp8.w.scale = reinterpret_cast<const std::byte*>(fp8.scale.data());
    for (int64_t n : {1, 6}) check(fp8, n);
    Owned fp4 = make(WeightFormat::kFp4Mx32, 8, 128, 22);
    for (size_t i = 0; i < fp4.scale.size(); ++i) fp4.scale[i] = uint8_t(i % 2 ? 1 : 200);
    for (int64_t n : {1, 6}) check(fp4, n);
  });
}

// A row of x gives the same bits alone or in a batch of any size (prefill = incremental),
// and whatever the thread count.
TEST(Matmul, ResultDoesNotDependOnBatchOrThreads) {
  for_each_isa([] {
    for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kFp8Block128,
                           WeightFormat::kFp4Mx32}) {
      Owned o = make(f, 150, 1088, 6);
      const int64_t n = 11;
      std::vector<float> x = random_x(n, 1088, 8);
      std::vector<float> batch(size_t(n * 150)), threads1(batch.size());
      matmul(o.w, x.data(), n, batch.data());
      set_thread_count(1);
      matmul(o.w, x.data(), n, threads1.data());
      set_thread_count(0);
      EXPECT_EQ(batch, threads1) << weight_format_name(f);
      for (int64_t split : {1, 2, 3, 4, 7}) {  // the first `split` rows, then the rest
        std::vector<float> parts(batch.size());
        matmul(o.w, x.data(), split, parts.data());
        matmul(o.w, x.data() + split * 1088, n - split, parts.data() + split * 150);
        EXPECT_EQ(batch, parts) << weight_format_name(f) << " split " << split;
      }
    }
  });
}

// matmul_isa.h's summation order written out for float32 weights, where the columns of a
// chunk are one vector in order: lane l of a block of 512 columns chains its columns
// l, l + lanes, ... with fused multiply-adds; the lanes are reduced by halves; the blocks'
// sums are added in order. The avx512 and avx2 variants must give exactly these bits on
// both paths (n = 1: decode, n = 7: tiled).
float sum_by_definition(const float* w, const float* x, int64_t cols, int lanes) {
  float out = 0;
  for (int64_t k0 = 0; k0 < cols; k0 += 512) {
    float lane[16] = {};
    for (int64_t c = k0; c < std::min<int64_t>(cols, k0 + 512); ++c)
      lane[(c - k0) % lanes] = std::fma(w[c], x[c], lane[(c - k0) % lanes]);
    for (int half = lanes / 2; half >= 1; half /= 2)
      for (int i = 0; i < half; ++i) lane[i] += lane[i + half];
    out = k0 == 0 ? lane[0] : out + lane[0];
  }
  return out;
}

TEST(Matmul, SimdVariantsFollowTheSummationOrder) {
  const int64_t rows = 37, cols = 1536;
  Owned o = make(WeightFormat::kF32, rows, cols, 21);
  const auto* w = reinterpret_cast<const float*>(o.data.data());
  for (const auto& [isa, lanes] : {std::pair<std::string_view, int>{"avx512", 16}, {"avx2", 8}}) {
    if (!set_matmul_isa(isa)) continue;
    for (int64_t n : {1, 7}) {
      std::vector<float> x = random_x(n, cols, 22), y(size_t(n * rows));
      matmul(o.w, x.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[size_t(i * rows + r)],
                    sum_by_definition(w + r * cols, x.data() + i * cols, cols, lanes))
              << isa << " n " << n << " row " << r << " input " << i;
        }
      }
    }
  }
  set_matmul_isa("");
}

TEST(Matmul, ManyEqualsOneByOne) {
  Owned a = make(WeightFormat::kFp4Mx32, 64, 256, 31);
  Owned b = make(WeightFormat::kFp8Block128, 300, 256, 32);
  Owned c = make(WeightFormat::kBF16, 5, 256, 33);
  std::vector<float> xa = random_x(3, 256, 1), xb = random_x(1, 256, 2), xc = random_x(7, 256, 3);
  std::vector<float> ya(3 * 64), yb(300), yc(7 * 5), ra(ya.size()), rb(yb.size()), rc(yc.size());
  const MatmulTask tasks[] = {{&a.w, xa.data(), 3, ya.data()},
                              {&b.w, xb.data(), 1, yb.data()},
                              {&c.w, xc.data(), 7, yc.data()},
                              {&c.w, xc.data(), 0, nullptr}};
  matmul_many(tasks);
  matmul(a.w, xa.data(), 3, ra.data());
  matmul(b.w, xb.data(), 1, rb.data());
  matmul(c.w, xc.data(), 7, rc.data());
  EXPECT_EQ(ya, ra);
  EXPECT_EQ(yb, rb);
  EXPECT_EQ(yc, rc);
}

// matmul_many converts an input once for the weights that share it, its format and its
// width (a decode token's experts); weights that differ in any of them, or calls with
// another n, get their own conversion. Both variants' layouts: float32 inputs and
// bf16-exact ones.
TEST(Matmul, ManySharingAnInputEqualsOneByOne) {
  Owned a1 = make(WeightFormat::kFp4Mx32, 64, 256, 41), a2 = make(WeightFormat::kFp4Mx32, 32, 256, 42);
  Owned narrow = make(WeightFormat::kFp4Mx32, 16, 96, 43);  // bf16 rows padded to 128
  Owned b = make(WeightFormat::kFp8Block128, 300, 256, 44);
  for (const bool exact : {false, true}) {
    std::vector<float> x = random_x(2, 256, 5);
    if (exact) round_fp8_blocks(x.data(), int64_t(x.size()), 128);
    struct Call {
      const Owned* w;
      int64_t n;
    };
    const Call calls[] = {{&a1, 2}, {&a2, 2}, {&b, 2}, {&a1, 2}, {&narrow, 2}, {&a1, 1}, {&a2, 2}};
    std::vector<std::vector<float>> ys, refs;
    std::vector<MatmulTask> tasks;
    for (const Call& c : calls) {
      ys.emplace_back(size_t(c.n * c.w->w.rows), -1.0f);
      refs.emplace_back(ys.back());
    }
    for (size_t i = 0; i < std::size(calls); ++i)
      tasks.push_back({&calls[i].w->w, x.data(), calls[i].n, ys[i].data(), exact});
    matmul_many(tasks);
    for (size_t i = 0; i < std::size(calls); ++i) {
      matmul(calls[i].w->w, x.data(), calls[i].n, refs[i].data(), exact);
      EXPECT_EQ(ys[i], refs[i]) << "call " << i << (exact ? ", bf16-exact x" : "");
    }
  }
}

TEST(Matmul, IsaSelection) {
  const auto isas = matmul_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.back(), "scalar");
  EXPECT_EQ(matmul_isa(), isas.front());
  EXPECT_FALSE(set_matmul_isa("no-such-isa"));
  EXPECT_EQ(matmul_isa(), isas.front());
}

TEST(Matmul, RowSliceSelectsRows) {
  Owned o = make(WeightFormat::kFp8Block128, 384, 128, 7);
  WeightMatrix part = o.w.row_slice(128, 256);
  std::vector<float> full(384 * 128), rows(128 * 128);
  o.w.dequantize_rows(0, 384, full.data());
  part.dequantize_rows(0, 128, rows.data());
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), full.begin() + 128 * 128));
}

// ---- the avx512bf16 variant (x declared exactly bf16) -----------------------------------

// x rounded as linear.cpp rounds FP8/FP4 inputs: FP8 values times power-of-two scales, over
// a wide range of magnitudes (so block scales vary).
std::vector<float> fp8_rounded_x(int64_t n, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  const int64_t padded = (cols + 127) / 128 * 128;
  std::vector<float> row(static_cast<size_t>(padded)), x;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < padded; ++c)
      row[size_t(c)] = float(rng.normal() * std::ldexp(1.0, int(rng.below(20)) - 10));
    round_fp8_blocks(row.data(), padded, 128);
    x.insert(x.end(), row.begin(), row.begin() + cols);
  }
  return x;
}

bool bf16_exact(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return (u & 0xFFFF) == 0;
}

// vdpbf16ps treats subnormal inputs and results as zero.
float flush(float v) { return std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }

// The avx512bf16 variant's arithmetic in scalar code, from matmul_isa.h: weights decoded
// without their scale, chunks of 128 columns as 4 vectors of 32 words, vdpbf16ps as two
// rounded adds (odd word first), scales by FMA per chunk, halving reduction per 512 block.
float emulate_bf16(const Owned& o, const float* x, int64_t r) {
  const WeightMatrix& w = o.w;
  const bool scaled = w.format != WeightFormat::kBF16;
  auto column = [&](int v, int j) {
    switch (w.format) {
      case WeightFormat::kFp8Block128:
        return 64 * (v / 2) + 16 * (j / 8) + 8 * (v % 2) + j % 8;
      case WeightFormat::kFp4Mx32:
        return 4 * j + v;
      default:
        return 32 * v + j;
    }
  };
  auto unscaled = [&](int64_t c) -> float {  // the weight's code without its scale
    if (w.format == WeightFormat::kFp8Block128)
      return fp8_e4m3_to_float(o.data[size_t(r * w.cols + c)]);
    if (w.format == WeightFormat::kFp4Mx32) {
      const uint8_t b = o.data[size_t((r * w.cols + c) / 2)];
      return fp4_e2m1_to_float(c % 2 ? b >> 4 : b & 15);
    }
    return bf16_to_float(reinterpret_cast<const uint16_t*>(o.data.data())[r * w.cols + c]);
  };
  auto scale = [&](int64_t c) -> float {
    if (c >= w.cols) return 0.0f;
    if (w.format == WeightFormat::kFp4Mx32)
      return e8m0_to_float(o.scale[size_t(r * (w.cols / 32) + c / 32)]);
    const int64_t s = (r / 128) * ((w.cols + 127) / 128) + c / 128;
    return w.scale_dtype == DType::F32 ? reinterpret_cast<const float*>(o.scale.data())[s]
                                       : e8m0_to_float(o.scale[size_t(s)]);
  };
  float y = 0;
  for (int64_t k0 = 0; k0 < w.cols; k0 += 512) {
    float lane[16] = {};
    for (int64_t c = k0; c < std::min(w.cols, k0 + 512); c += 128) {
      float part[16] = {};
      float* sum = scaled ? part : lane;
      for (int v = 0; v < 4; ++v) {
        for (int i = 0; i < 16; ++i) {
          float acc = flush(sum[i]);
          for (int j : {2 * i + 1, 2 * i}) {  // past the last column: zeros
            const int64_t col = c + column(v, j);
            const float wv = col < w.cols ? flush(unscaled(col)) : 0.0f;
            const float xv = col < w.cols ? flush(x[col]) : 0.0f;
            acc = flush(acc + wv * xv);  // the product is exact
          }
          sum[i] = acc;
        }
      }
      if (scaled) {
        for (int i = 0; i < 16; ++i) {
          const int64_t group = w.format == WeightFormat::kFp4Mx32 ? c + 32 * (i / 4) : c;
          lane[i] = std::fma(part[i], scale(group), lane[i]);
        }
      }
    }
    for (int width = 8; width >= 1; width /= 2)
      for (int i = 0; i < width; ++i) lane[i] += lane[i + width];
    y = k0 == 0 ? lane[0] : y + lane[0];
  }
  return y;
}

bool has_bf16_variant() {
  const auto isas = matmul_isas();
  return std::find(isas.begin(), isas.end(), "avx512bf16") != isas.end();
}

// Runs `body` with each variant for bf16-exact calls this CPU has: avx512bf16 and, on CPUs
// with AMX-BF16, amx (whose tile unit sums in an order of its own: checked against the
// bound, not an emulation); then restores the default.
template <typename Body>
void for_each_bf16_isa(Body body) {
  for (std::string_view isa : {"avx512bf16", "amx"}) {
    if (!set_matmul_isa(isa)) continue;
    SCOPED_TRACE(std::string(isa));
    body();
  }
  set_matmul_isa("");
}

// The variant against its emulation (avx512bf16: bit for bit) and against the exact sum:
// products are exact and each term passes through at most `depth` float32 roundings
// (avx512bf16, FP8 / FP4: 8 adds in its chunk, 4 scale FMAs, 4 reduction steps, one add per
// further 512-column block; BF16: 32 adds per block instead of 8 + 4; amx: one add per
// 32-column step, and at most 32 inside one), so |y - exact| <= depth * 2^-24 * sum |w x|
// (while no product, partial sum or x is below 2^-126: both flush those to zero).
void check_bf16(const Owned& o, const std::vector<float>& x, int64_t n, bool bound = true) {
  std::vector<float> y(size_t(n * o.w.rows));
  matmul(o.w, x.data(), n, y.data(), true);
  const bool amx = matmul_isa() == "amx";
  const int64_t blocks = (o.w.cols + 511) / 512;
  const double depth = amx ? 33 + (o.w.cols + 31) / 32
                           : (o.w.format == WeightFormat::kBF16 ? 36 : 16) + blocks;
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x.data() + i * o.w.cols;
    for (int64_t r = 0; r < o.w.rows; ++r) {
      const float got = y[size_t(i * o.w.rows + r)], want = emulate_bf16(o, xi, r);
      SCOPED_TRACE(::testing::Message()
                   << weight_format_name(o.w.format) << " " << o.w.rows << "x" << o.w.cols
                   << " row " << r << " input " << i << " n " << n);
      double acc = 0, mag = 0;
      for (int64_t c = 0; c < o.w.cols; ++c) {
        acc += element(o, r, c) * xi[c];
        mag += std::fabs(element(o, r, c) * xi[c]);
      }
      if (std::isnan(want) || (amx && std::isnan(acc))) {
        ASSERT_TRUE(std::isnan(got));
        continue;
      }
      if (!amx) {
        ASSERT_EQ(got, want);
      }
      // (+ depth * 2^-149: a scale FMA may round to a float32 subnormal.)
      if (bound && std::isfinite(float(mag))) {
        ASSERT_LE(std::fabs(got - acc), depth * (0x1p-24 * mag + 0x1p-149));
      }
    }
  }
}

TEST(MatmulBf16, OfficialInputRoundingIsBf16Exact) {
  // What linear.cpp relies on to declare its rounded inputs exact.
  Rng rng(3);
  std::vector<float> x(128 * 64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = i < 128 ? 0.0f : float(rng.normal() * std::ldexp(1.0, int(rng.below(160)) - 80));
  round_fp8_blocks(x.data(), int64_t(x.size()), 128);
  for (float v : x) ASSERT_TRUE(bf16_exact(v)) << v;
}

TEST(MatmulBf16, EveryFormatMatchesEmulationAndBound) {
  if (!has_bf16_variant()) GTEST_SKIP() << "no AVX-512 BF16 + VBMI";
  // n = 1..4 decode in registers, 5, 16, 33 through the tiles; odd row counts, widths with
  // partial chunks (70, 96, 300, 1088, 1100: the checked decode) or whole ones (128, 256,
  // 384, 640: the fast one), and several 512-column blocks.
  const Owned weights[] = {make(WeightFormat::kBF16, 37, 70, 2),
                           make(WeightFormat::kBF16, 21, 1040, 12),
                           make(WeightFormat::kBF16, 19, 384, 17),
                           make(WeightFormat::kFp8Block128, 133, 300, 3),
                           make(WeightFormat::kFp8Block128, 130, 1100, 13),
                           make(WeightFormat::kFp8Block128, 135, 640, 18),
                           make(WeightFormat::kFp8Block128, 131, 256, 4, DType::F32),
                           make(WeightFormat::kFp4Mx32, 33, 128, 5),
                           make(WeightFormat::kFp4Mx32, 19, 1088, 15),
                           make(WeightFormat::kFp4Mx32, 7, 96, 16)};
  for_each_bf16_isa([&] {
    for (int64_t n : {1, 2, 3, 4, 5, 16, 17, 33, 70}) {
      for (const Owned& o : weights) {
        if (o.w.scale_dtype == DType::F32 && matmul_isa() == "amx") continue;  // not taken
        check_bf16(o, fp8_rounded_x(n, o.w.cols, uint64_t(n)), n);
      }
    }
  });
}

// FP8 subnormal, zero, largest and NaN codes; E8M0 scales at both ends: 2^-127 (code 0, a
// float32 subnormal), 2^-126, 2^-125, then (sums overflowing to inf or NaN, compared with
// the emulation only) 2^121, 2^127 and NaN (255). FP4 with the same extremes. Codes 0 and
// 255 send the rows to the checked decode; the lists without them take the fast one (whole
// chunks, scales as code << 23).
TEST(MatmulBf16, SpecialCodesAndScales) {
  if (!has_bf16_variant()) GTEST_SKIP() << "no AVX-512 BF16 + VBMI";
  const std::vector<uint8_t> small = {135, 1, 0, 2, 126}, large = {248, 254, 255, 127, 100},
                             small_regular = {135, 1, 3, 2, 126},
                             large_regular = {248, 254, 253, 127, 100};
  for (const std::vector<uint8_t>* codes : {&small, &large, &small_regular, &large_regular}) {
    Owned fp8 = make(WeightFormat::kFp8Block128, 128, 640, 21);
    for (size_t i = 0; i < fp8.data.size(); i += 3) fp8.data[i] = uint8_t(i % 16);  // subnormals
    for (size_t i = 1; i < fp8.data.size(); i += 7) fp8.data[i] = i % 2 ? 0x7E : 0xFE;  // 448
    for (size_t i = 2; i < fp8.data.size(); i += 11) fp8.data[i] = 0x80;                // -0
    fp8.data[5] = 0x7F;              // NaN in row 0
    fp8.data[640 * 7 + 200] = 0xFF;  // NaN in row 7
    fp8.scale = *codes;
    fp8.w.scale = reinterpret_cast<const std::byte*>(fp8.scale.data());
    Owned fp4 = make(WeightFormat::kFp4Mx32, 9, 256, 22);
    for (size_t i = 0; i < fp4.scale.size(); ++i) fp4.scale[i] = (*codes)[(i * 3) % 5];
    // As the model binds its weights: the regular lists are marked, and their fast decode
    // runs without scanning the codes.
    fp8.w.mark_regular_scales();
    fp4.w.mark_regular_scales();
    const bool regular = codes == &small_regular || codes == &large_regular;
    ASSERT_EQ(fp8.w.regular_scales, regular);
    ASSERT_EQ(fp4.w.regular_scales, regular);
    for_each_bf16_isa([&] {
      for (int64_t n : {1, 4, 6, 20}) {
        check_bf16(fp8, fp8_rounded_x(n, fp8.w.cols, 5), n);
        check_bf16(fp4, fp8_rounded_x(n, fp4.w.cols, 6), n);
      }
    });
  }
}

// vdpbf16ps counts bf16 subnormals as zero: 64 weights of 2^-133 times 2^100 give 0, not
// 2^-27 (and the emulation, which flushes the same way, agrees on random subnormals).
TEST(MatmulBf16, SubnormalsCountAsZero) {
  if (!has_bf16_variant()) GTEST_SKIP() << "no AVX-512 BF16 + VBMI";
  Owned o = make(WeightFormat::kBF16, 5, 64, 23);
  auto* h = reinterpret_cast<uint16_t*>(o.data.data());
  for (int64_t c = 0; c < 64; ++c) h[c] = 0x0001;  // row 0: 2^-133
  for (int64_t i = 64; i < 5 * 64; i += 5) h[i] = uint16_t(0x0001 + i % 0x7F);
  for_each_bf16_isa([&] {
    std::vector<float> x(64, 0x1p100f);
    float y[5];
    matmul(o.w, x.data(), 1, y, true);
    EXPECT_EQ(y[0], 0.0f);
    matmul(o.w, x.data(), 1, y, false);
    // amx also takes the undeclared calls on BF16 weights (x split into bf16 parts).
    EXPECT_EQ(y[0], matmul_isa() == "amx" ? 0.0f : 0x1p-27f);
    x = fp8_rounded_x(1, 64, 7);
    check_bf16(o, x, 1, false);
  });
}

TEST(MatmulBf16, ResultDoesNotDependOnBatchOrThreads) {
  if (!has_bf16_variant()) GTEST_SKIP() << "no AVX-512 BF16 + VBMI";
  for_each_bf16_isa([] {
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kFp8Block128, WeightFormat::kFp4Mx32}) {
    Owned o = make(f, 150, 1088, 6);
    const int64_t n = 37;
    std::vector<float> x = fp8_rounded_x(n, 1088, 8);
    std::vector<float> batch(size_t(n * 150)), threads1(batch.size());
    matmul(o.w, x.data(), n, batch.data(), true);
    set_thread_count(1);
    matmul(o.w, x.data(), n, threads1.data(), true);
    set_thread_count(0);
    EXPECT_EQ(batch, threads1) << weight_format_name(f);
    for (int64_t split : {1, 2, 3, 4, 7, 16, 20}) {  // the first `split` rows, then the rest
      std::vector<float> parts(batch.size());
      matmul(o.w, x.data(), split, parts.data(), true);
      matmul(o.w, x.data() + split * 1088, n - split, parts.data() + split * 150, true);
      EXPECT_EQ(batch, parts) << weight_format_name(f) << " split " << split;
    }
  }
  });
}

// Calls that do not declare x exact, and F32 weights, run the float32 variant bit for bit
// (but for amx's split x on BF16 weights); declared calls on the other formats do not
// (other rounding: some output differs).
TEST(MatmulBf16, OnlyDeclaredCallsTakeIt) {
  if (!has_bf16_variant()) GTEST_SKIP() << "no AVX-512 BF16 + VBMI";
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kFp8Block128,
                         WeightFormat::kFp4Mx32}) {
    Owned o = make(f, 64, 1024, 9);
    for (int64_t n : {1, 6}) {
      std::vector<float> x = fp8_rounded_x(n, 1024, 10);
      std::vector<float> plain(size_t(n * 64)), declared(plain.size()), f32(plain.size());
      for (std::string_view isa : {"avx512bf16", "amx"}) {
        if (!set_matmul_isa(isa)) continue;
        matmul(o.w, x.data(), n, plain.data());
        matmul(o.w, x.data(), n, declared.data(), true);
        ASSERT_TRUE(set_matmul_isa("avx512"));
        matmul(o.w, x.data(), n, f32.data(), true);
        set_matmul_isa("");
        if (isa == "amx" && f == WeightFormat::kBF16) {
          EXPECT_NE(plain, f32) << isa;
        } else {
          EXPECT_EQ(plain, f32) << isa << " " << weight_format_name(f);
        }
        if (f == WeightFormat::kF32) {
          EXPECT_EQ(declared, f32) << isa;
        } else {
          EXPECT_NE(declared, f32) << isa << " " << weight_format_name(f);
        }
      }
    }
  }
}

// amx on BF16 weights with a float32 x (the output head): x split into bf16 hi + mid + lo,
// which sum to it exactly, every product exact, one float32 chain of at most 3 x 32 adds per
// 32-column step: within the bound of that many roundings of the exact sum, and the same bits
// whatever the input count, split and threads.
TEST(MatmulAmx, FloatInputsOnBf16Weights) {
  if (!set_matmul_isa("amx")) GTEST_SKIP() << "no AMX-BF16";
  const Owned weights[] = {make(WeightFormat::kBF16, 37, 70, 31),
                           make(WeightFormat::kBF16, 48, 1024, 32),
                           make(WeightFormat::kBF16, 21, 1040, 33)};
  for (const Owned& o : weights) {
    const int64_t cols = o.w.cols, rows = o.w.rows, n = 40;
    std::vector<float> x = random_x(n, cols, 34);
    for (size_t i = 0; i < x.size(); i += 7) x[i] *= std::ldexp(1.0f, int(i % 61) - 30);
    std::vector<float> y(static_cast<size_t>(n * rows)), one(static_cast<size_t>(rows));
    matmul(o.w, x.data(), n, y.data());
    const double depth = 3 * (33 + (cols + 31) / 32);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < rows; ++r) {
        double acc = 0, mag = 0;
        for (int64_t c = 0; c < cols; ++c) {
          acc += element(o, r, c) * x[size_t(i * cols + c)];
          mag += std::fabs(element(o, r, c) * x[size_t(i * cols + c)]);
        }
        ASSERT_LE(std::fabs(y[size_t(i * rows + r)] - acc), depth * 0x1p-24 * mag)
            << rows << "x" << cols << " row " << r << " input " << i;
      }
    }
    for (int64_t i : {int64_t{0}, int64_t{17}, n - 1}) {  // alone: the same bits
      matmul(o.w, x.data() + i * cols, 1, one.data());
      EXPECT_TRUE(std::equal(one.begin(), one.end(), y.begin() + i * rows)) << "input " << i;
    }
    std::vector<float> parts(y.size());
    matmul(o.w, x.data(), 5, parts.data());
    matmul(o.w, x.data() + 5 * cols, n - 5, parts.data() + 5 * rows);
    EXPECT_EQ(parts, y);
    set_thread_count(1);
    std::vector<float> threads1(y.size());
    matmul(o.w, x.data(), n, threads1.data());
    set_thread_count(0);
    EXPECT_EQ(threads1, y);
  }
  set_matmul_isa("");
}

}  // namespace
}  // namespace flint::kernels
