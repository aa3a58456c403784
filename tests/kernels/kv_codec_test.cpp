// The KV row formats against their definitions: float32 keeps everything, bf16 rounds each
// value to bf16, fp8 rounds the nope dims as DeepSeek's act_quant does (E4M3, power-of-two
// scale per 64) and the rope dims to bf16; stored-and-read equals round, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "base/rng.h"
#include "formats/bf16.h"
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
