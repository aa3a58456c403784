// Block dequantisation against a per-element definition written from the layout rules,
// on shapes that are and are not multiples of the block sizes, for whole matrices and
// row ranges.
#include "formats/block_dequant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "format_reference.h"

namespace flint {
namespace {

struct Shape {
  int64_t rows, cols, row_begin, row_end;
};

std::vector<uint8_t> random_bytes(std::size_t n, std::mt19937& rng, int lo = 0, int hi = 255) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(dist(rng));
  return out;
}

// Bitwise equality, so that NaN codes must produce NaN in the same places.
void expect_same(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      ASSERT_TRUE(std::isnan(actual[i])) << i;
    } else {
      ASSERT_EQ(actual[i], expected[i]) << "element " << i;
    }
  }
}

const Shape kFp8Shapes[] = {{128, 256, 0, 128}, {300, 200, 0, 300},   {300, 200, 130, 257},
                            {1, 1, 0, 1},       {129, 129, 128, 129}, {5, 0, 0, 5}};

TEST(BlockDequant, Fp8WithE8M0ScalesPerBlock) {
  std::mt19937 rng(1);
  for (const Shape& s : kFp8Shapes) {
    const int64_t srows = (s.rows + 127) / 128, scols = (s.cols + 127) / 128;
    auto weight = random_bytes(s.rows * s.cols, rng);
    auto scale = random_bytes(srows * scols, rng, 100, 150);
    if (!scale.empty()) scale[0] = 0;  // 2^-127: products become subnormal
    std::vector<float> expected;
    for (int64_t r = s.row_begin; r < s.row_end; ++r) {
      for (int64_t c = 0; c < s.cols; ++c) {
        const int e = scale[(r / 128) * scols + c / 128];
        expected.push_back(
            static_cast<float>(std::ldexp(reference::fp8_e4m3(weight[r * s.cols + c]), e - 127)));
      }
    }
    std::vector<float> out((s.row_end - s.row_begin) * s.cols, -1.0f);
    dequant_fp8_block128(weight.data(), scale.data(), s.rows, s.cols, s.row_begin, s.row_end,
                         out.data());
    expect_same(out, expected);
  }
}

TEST(BlockDequant, Fp8WithFloatScalesPerBlock) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(1e-4f, 1e-2f);
  for (const Shape& s : kFp8Shapes) {
    const int64_t srows = (s.rows + 127) / 128, scols = (s.cols + 127) / 128;
    auto weight = random_bytes(s.rows * s.cols, rng);
    std::vector<float> scale(srows * scols);
    for (float& x : scale) x = dist(rng);
    std::vector<float> expected;
    for (int64_t r = s.row_begin; r < s.row_end; ++r) {
      for (int64_t c = 0; c < s.cols; ++c) {
        expected.push_back(static_cast<float>(reference::fp8_e4m3(weight[r * s.cols + c])) *
                           scale[(r / 128) * scols + c / 128]);
      }
    }
    std::vector<float> out((s.row_end - s.row_begin) * s.cols, -1.0f);
    dequant_fp8_block128(weight.data(), scale.data(), s.rows, s.cols, s.row_begin, s.row_end,
                         out.data());
    expect_same(out, expected);
  }
}

TEST(BlockDequant, Mxfp4WithOneScalePer32Inputs) {
  std::mt19937 rng(3);
  const Shape shapes[] = {{4, 64, 0, 4}, {7, 96, 2, 6}, {3, 40, 0, 3}, {2, 2, 1, 2}};
  for (const Shape& s : shapes) {
    const int64_t scols = (s.cols + 31) / 32;
    auto packed = random_bytes(s.rows * s.cols / 2, rng);
    auto scale = random_bytes(s.rows * scols, rng, 110, 140);
    std::vector<float> expected;
    for (int64_t r = s.row_begin; r < s.row_end; ++r) {
      for (int64_t c = 0; c < s.cols; ++c) {
        const uint8_t byte = packed[r * (s.cols / 2) + c / 2];
        const uint8_t nibble = c % 2 == 0 ? (byte & 0xF) : (byte >> 4);
        const int e = scale[r * scols + c / 32];
        expected.push_back(static_cast<float>(std::ldexp(reference::fp4_e2m1(nibble), e - 127)));
      }
    }
    std::vector<float> out((s.row_end - s.row_begin) * s.cols, -1.0f);
    dequant_mxfp4(packed.data(), scale.data(), s.rows, s.cols, s.row_begin, s.row_end, out.data());
    expect_same(out, expected);
  }
}

TEST(BlockDequant, Bf16Rows) {
  std::mt19937 rng(4);
  const int64_t rows = 5, cols = 33;
  std::vector<uint16_t> weight(rows * cols);
  std::uniform_int_distribution<int> dist(0, 0xFFFF);
  for (auto& w : weight) w = static_cast<uint16_t>(dist(rng));
  std::vector<float> expected;
  for (int64_t i = 1 * cols; i < 4 * cols; ++i) {
    expected.push_back(static_cast<float>(reference::bf16(weight[i])));
  }
  std::vector<float> out(3 * cols);
  dequant_bf16(weight.data(), rows, cols, 1, 4, out.data());
  expect_same(out, expected);
}

}  // namespace
}  // namespace flint
