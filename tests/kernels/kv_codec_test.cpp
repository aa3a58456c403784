// The KV row formats against their definitions: float32 keeps everything, bf16 rounds each
// value to bf16, fp8 rounds the nope dims as DeepSeek's act_quant does (E4M3, power-of-two
// scale per 64) and the rope dims to bf16; stored-and-read equals round, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <vector>

#include "base/rng.h"
#include "formats/bf16.h"
#include "formats/fp8.h"
#include "kernels/kv_codec.h"
#include "kernels/quant_round.h"

namespace flint::kernels {
namespace {

std::vector<float> random_rows(int64_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  }
  return true;
}

std::vector<float> stored_and_read(const KvRowFormat& f, const std::vector<float>& rows) {
  const int64_t count = static_cast<int64_t>(rows.size()) / f.dim;
  std::vector<uint8_t> bytes(static_cast<size_t>(count * f.bytes()));
  encode_kv_rows(f, rows.data(), count, bytes.data());
  std::vector<float> out(rows.size());
  decode_kv_rows(f, bytes.data(), count, out.data());
  return out;
}

TEST(KvCodec, RowBytes) {
  // DeepSeek-V4: head_dim 512 with 64 rope dims: 448 E4M3 + 7 scales + 64 bf16 = 583 bytes,
  // 57% of bf16's 1024.
  EXPECT_EQ((KvRowFormat{KvDtype::kFp8, 512, 64}.bytes()), 583);
  EXPECT_EQ((KvRowFormat{KvDtype::kBf16, 512, 0}.bytes()), 1024);
  EXPECT_EQ((KvRowFormat{KvDtype::kF32, 128, 0}.bytes()), 512);
}

TEST(KvCodec, StoredAndReadEqualsRound) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kFp8}) {
    for (double scale : {1e-6, 0.01, 1.0, 300.0}) {
      KvRowFormat f{d, 256, d == KvDtype::kFp8 ? 64 : 0};
      auto rows = random_rows(7 * f.dim, 11, scale);
      auto rounded = rows;
      round_kv_rows(f, rounded.data(), 7);
      EXPECT_TRUE(same_bits(stored_and_read(f, rows), rounded)) << kv_dtype_name(d) << " " << scale;
      // Rounding is idempotent: a stored row stored again is unchanged.
      EXPECT_TRUE(same_bits(stored_and_read(f, rounded), rounded)) << kv_dtype_name(d);
    }
  }
}

TEST(KvCodec, MatchesItsDefinition) {
  KvRowFormat f{KvDtype::kFp8, 256, 64};
  auto rows = random_rows(3 * f.dim, 5, 2.0);
  auto got = stored_and_read(f, rows);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<float> expect(rows.begin() + r * f.dim, rows.begin() + (r + 1) * f.dim);
    round_fp8_blocks(expect.data(), f.dim - f.rope_dim, 64);  // DeepSeek's act_quant
    for (int64_t i = f.dim - f.rope_dim; i < f.dim; ++i)
      expect[static_cast<size_t>(i)] = bf16_to_float(float_to_bf16(expect[static_cast<size_t>(i)]));
    std::vector<float> row(got.begin() + r * f.dim, got.begin() + (r + 1) * f.dim);
    EXPECT_TRUE(same_bits(row, expect)) << "row " << r;
  }
  KvRowFormat b{KvDtype::kBf16, 64, 0};
  auto brows = random_rows(64, 6, 1.0);
  auto bgot = stored_and_read(b, brows);
  for (size_t i = 0; i < brows.size(); ++i)
    EXPECT_EQ(bgot[i], bf16_to_float(float_to_bf16(brows[i])));
}

// Every E4M3 code (NaN, subnormals, both zeros) under each of ten scales from the smallest
// to the largest E8M0 code, and varied bf16 rope bytes, against the scalar definitions:
// the vectorised decode gives the same bits. Block k (row k / 7) holds codes 64 (k / 10)
// .. + 63 under scale k % 10, so blocks 0-39 pair every code with every scale.
TEST(KvCodec, DecodesEveryCodeAsItsDefinition) {
  const KvRowFormat f{KvDtype::kFp8, 512, 64};
  const int64_t nope = f.dim - f.rope_dim, blocks = nope / 64;
  const uint8_t scale_codes[] = {0, 1, 100, 118, 127, 128, 140, 200, 254, 255};
  const auto scales = static_cast<int64_t>(std::size(scale_codes));
  const int64_t rows = (256 / 64 * scales + blocks - 1) / blocks;
  std::vector<uint8_t> stored(static_cast<size_t>(rows * f.bytes()));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = stored.data() + r * f.bytes();
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k = r * blocks + b;
      for (int64_t i = 0; i < 64; ++i) row[b * 64 + i] = static_cast<uint8_t>(k / scales * 64 + i);
      row[nope + b] = scale_codes[static_cast<size_t>(k % scales)];
    }
    for (int64_t i = 0; i < 2 * f.rope_dim; ++i)
      row[nope + blocks + i] = static_cast<uint8_t>((r * 2 * f.rope_dim + i) * 37);
  }
  std::vector<float> out(static_cast<size_t>(rows * f.dim));
  decode_kv_rows(f, stored.data(), rows, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = stored.data() + r * f.bytes();
    for (int64_t i = 0; i < f.dim; ++i) {
      float expect;
      if (i < nope) {
        const float s = std::bit_cast<float>(static_cast<uint32_t>(row[nope + i / 64]) << 23);
        expect = fp8_e4m3_to_float(row[i]) * s;
      } else {
        const uint8_t* p = row + nope + blocks + 2 * (i - nope);
        expect = bf16_to_float(static_cast<uint16_t>(p[0] | p[1] << 8));
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(r * f.dim + i)]),
                std::bit_cast<uint32_t>(expect))
          << "row " << r << " value " << i << " code " << int{row[std::min(i, nope - 1)]};
    }
  }
  // bf16 rows: every 16-bit pattern.
  const KvRowFormat b{KvDtype::kBf16, 1024, 0};
  std::vector<uint8_t> bytes(static_cast<size_t>(64 * b.bytes()));
  for (size_t i = 0; i < bytes.size() / 2; ++i) {
    bytes[2 * i] = static_cast<uint8_t>(i);
    bytes[2 * i + 1] = static_cast<uint8_t>(i >> 8);
  }
  std::vector<float> wide(static_cast<size_t>(64 * b.dim));
  decode_kv_rows(b, bytes.data(), 64, wide.data());
  for (size_t i = 0; i < wide.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), static_cast<uint32_t>(i & 0xFFFF) << 16) << i;
}

// Under --quant-simulation official the model rounds the nope dims with round_fp8_blocks
// before storing: fp8 storage keeps them exactly.
TEST(KvCodec, Fp8IsLosslessForOfficiallyRoundedRows) {
  KvRowFormat f{KvDtype::kFp8, 512, 64};
  auto rows = random_rows(16 * f.dim, 9, 3.0);
  for (int64_t r = 0; r < 16; ++r) {
    round_fp8_blocks(rows.data() + r * f.dim, f.dim - f.rope_dim, 64);
    for (int64_t i = f.dim - f.rope_dim; i < f.dim; ++i) {  // rope dims as bf16 values
      float& x = rows[static_cast<size_t>(r * f.dim + i)];
      x = bf16_to_float(float_to_bf16(x));
    }
  }
  EXPECT_TRUE(same_bits(stored_and_read(f, rows), rows));
}

}  // namespace
}  // namespace flint::kernels
