// The bf16 decoding shared by the matmul variants that multiply bf16 (matmul_avx512_bf16.cpp,
// matmul_amx.cpp): weights decoded to bf16 in registers with byte permutes, 128 columns
// (a chunk: 4 vectors of 32 words) at a time, in the column order matmul_isa.h states, and x
// converted to bf16 and permuted to the same order. Include this only inside a target region
// with AVX-512 BF16 + VBMI (as matmul_driver.h: every function here is compiled for it).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/check.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "formats/weight.h"

#define FLINT_UNROLL _Pragma("GCC unroll 16")

namespace flint::kernels::detail {
namespace {
constexpr int64_t kChunk = 128;  // columns: 4 vectors of 32 bf16
constexpr int64_t kBlock = 512;  // columns per horizontal reduction
constexpr int64_t kChunksPerBlock = kBlock / kChunk;
constexpr int kTileRows = 16;

using Vi = __m512i;
using V = __m512;

// Column (within its chunk) of word j of decoded vector v (matmul_isa.h).
int chunk_column(WeightFormat f, int v, int j) {
  switch (f) {
    case WeightFormat::kFp8Block128:
      return 64 * (v / 2) + 16 * (j / 8) + 8 * (v % 2) + j % 8;
    case WeightFormat::kFp4Mx32:
      return 4 * j + v;
    default:
      return 32 * v + j;
  }
}

uint16_t bf16_bits(float f) {  // exact for the values tabled here
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

struct Tables {
  // bf16 of E4M3 magnitude m (0..127; 127 is NaN): low bytes, then high bytes.
  alignas(64) uint8_t fp8_lo[128], fp8_hi[128];
  // bf16 of E2M1 code i % 16 (vpermw reads 5 index bits).
  alignas(64) uint16_t fp4[32];
  // x's permutation, per format and vector v: word j of v is word idx[j] (0..63) of the
  // chunk's natural words 0..63 (mask bit clear) or 64..127 (set).
  alignas(64) uint16_t perm_idx[3][4][32];
  uint32_t perm_hi[3][4];
};

int format_slot(WeightFormat f) {
  return f == WeightFormat::kFp8Block128 ? 0 : f == WeightFormat::kFp4Mx32 ? 1 : 2;
}

const Tables& tables() {
  static const Tables built = [] {
    Tables t{};
    for (int m = 0; m < 128; ++m) {
      const uint16_t b = bf16_bits(fp8_e4m3_to_float(static_cast<uint8_t>(m)));
      t.fp8_lo[m] = static_cast<uint8_t>(b);
      t.fp8_hi[m] = static_cast<uint8_t>(b >> 8);
    }
    for (int i = 0; i < 32; ++i) t.fp4[i] = bf16_bits(kFp4E2M1Values[i % 16]);
    for (WeightFormat f :
         {WeightFormat::kFp8Block128, WeightFormat::kFp4Mx32, WeightFormat::kBF16}) {
      const int s = format_slot(f);
      for (int v = 0; v < 4; ++v) {
        for (int j = 0; j < 32; ++j) {
          const int c = chunk_column(f, v, j);
          t.perm_idx[s][v][j] = static_cast<uint16_t>(c % 64);
          if (c >= 64) t.perm_hi[s][v] |= 1u << j;
        }
      }
    }
    return t;
  }();
  return built;
}

// Bits 0 .. count-1 set (count clamped to 0 .. 64).
uint64_t first_bits(int64_t count) {
  return count <= 0 ? 0 : count >= 64 ? ~uint64_t{0} : (uint64_t{1} << count) - 1;
}

Vi load_bytes(const uint8_t* p, int64_t count) {
  return count >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(first_bits(count), p);
}

// Decoders: chunk(r, c, valid, w, scale) writes the 4 bf16 vectors of columns
// [c, c + 128) of row r (zero past `valid`) and, for kScaled formats, the scale per lane;
// at(r, c) is where that chunk's kChunkBytes bytes start (chunks start on 64-byte lines
// when rows do). The decode loop's fast version: whole(row(r), c, w, scale) for a whole
// chunk of a row whose scales regular(r0, r1) has vouched for (no masks, no checks, no
// scalar work; Row holds the row's pointers).
struct Bf16Decoder {
  static constexpr bool kScaled = false;
  const uint16_t* data;
  int64_t cols;
  explicit Bf16Decoder(const WeightMatrix& w)
      : data(reinterpret_cast<const uint16_t*>(w.data)), cols(w.cols) {}
  static constexpr int kChunkBytes = 2 * kChunk;
  const void* at(int64_t r, int64_t c) const { return data + r * cols + c; }
  bool regular(int64_t, int64_t) const { return true; }
  struct Row {
    const uint16_t* p;
  };
  Row row(int64_t r) const { return {data + r * cols}; }
  [[gnu::always_inline]] void whole(const Row& row, int64_t c, Vi* w, V*) const {
    FLINT_UNROLL
    for (int v = 0; v < 4; ++v) w[v] = _mm512_loadu_si512(row.p + c + 32 * v);
  }
  void chunk(int64_t r, int64_t c, int64_t valid, Vi* w, V*) const {
    const uint16_t* p = data + r * cols + c;
    FLINT_UNROLL
    for (int v = 0; v < 4; ++v) {
      w[v] = valid >= kChunk ? _mm512_loadu_si512(p + 32 * v)
                             : _mm512_maskz_loadu_epi16(
                                   static_cast<__mmask32>(first_bits(valid - 32 * v)), p + 32 * v);
    }
  }
};

// E4M3: the 7-bit magnitude indexes 128-entry tables of the bf16's low and high bytes
// (vpermi2b), the sign is OR-ed into the high byte, unpacking interleaves the bytes.
struct Fp8Decoder {
  static constexpr bool kScaled = true;
  const WeightMatrix* m;
  const uint8_t* data;
  Vi lo0, lo1, hi0, hi1, sign;
  explicit Fp8Decoder(const WeightMatrix& w)
      : m(&w), data(reinterpret_cast<const uint8_t*>(w.data)) {
    const Tables& t = tables();
    lo0 = _mm512_load_si512(t.fp8_lo);
    lo1 = _mm512_load_si512(t.fp8_lo + 64);
    hi0 = _mm512_load_si512(t.fp8_hi);
    hi1 = _mm512_load_si512(t.fp8_hi + 64);
    sign = _mm512_set1_epi8(static_cast<char>(0x80));
  }
  [[gnu::always_inline]] void half(Vi b, Vi* w) const {
    const Vi lo = _mm512_permutex2var_epi8(lo0, b, lo1);
    Vi hi = _mm512_permutex2var_epi8(hi0, b, hi1);
    hi = _mm512_ternarylogic_epi32(hi, b, sign, 0xF8);  // hi | (b & sign)
    w[0] = _mm512_unpacklo_epi8(lo, hi);
    w[1] = _mm512_unpackhi_epi8(lo, hi);
  }
  float block_scale(int64_t s) const {
    return m->scale_dtype == DType::F32
               ? reinterpret_cast<const float*>(m->scale)[s]
               : e8m0_to_float(reinterpret_cast<const uint8_t*>(m->scale)[s]);
  }
  static constexpr int kChunkBytes = kChunk;
  const void* at(int64_t r, int64_t c) const { return data + r * m->cols + c; }
  // Float32 scales are used as they are; E8M0 codes 0 and 255 need e8m0_to_float.
  bool regular(int64_t r0, int64_t r1) const {
    if (m->scale_dtype == DType::F32) return true;
    const int64_t per_row = (m->cols + 127) / 128;
    return e8m0_codes_regular(reinterpret_cast<const uint8_t*>(m->scale) + r0 / 128 * per_row,
                              static_cast<uint64_t>(((r1 - 1) / 128 - r0 / 128 + 1) * per_row));
  }
  struct Row {
    const uint8_t* p;
    const uint8_t* codes;  // the row's block scales: E8M0 codes, or
    const float* f32;      // float32 scales
  };
  Row row(int64_t r) const {
    const int64_t s = (r / 128) * ((m->cols + 127) / 128);
    const bool f32 = m->scale_dtype == DType::F32;
    return {data + r * m->cols, f32 ? nullptr : reinterpret_cast<const uint8_t*>(m->scale) + s,
            f32 ? reinterpret_cast<const float*>(m->scale) + s : nullptr};
  }
  [[gnu::always_inline]] void whole(const Row& row, int64_t c, Vi* w, V* scale) const {
    half(_mm512_loadu_si512(row.p + c), w);
    half(_mm512_loadu_si512(row.p + c + 64), w + 2);
    *scale =
        row.f32 != nullptr
            ? _mm512_set1_ps(row.f32[c / kChunk])
            : _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(row.codes[c / kChunk]) << 23));
  }
  void chunk(int64_t r, int64_t c, int64_t valid, Vi* w, V* scale) const {
    const uint8_t* p = data + r * m->cols + c;
    half(load_bytes(p, valid), w);
    half(load_bytes(p + 64, valid - 64), w + 2);
    *scale = _mm512_set1_ps(block_scale((r / 128) * ((m->cols + 127) / 128) + c / 128));
  }
};

// E2M1: word j of the chunk's 64 bytes holds columns 4j .. 4j + 3, one nibble each; shifting
// it right by 4v puts column 4j + v's nibble in the 5 bits vpermw reads from a 32-word table
// of bf16 values (the bit above the nibble picks the table's upper copy). Words 8g .. 8g + 7
// are scale group g, lanes 4g .. 4g + 3 of the products.
struct Fp4Decoder {
  static constexpr bool kScaled = true;
  const uint8_t* data;
  const uint8_t* scales;
  int64_t cols;
  Vi table, rotate, exponent;
  explicit Fp4Decoder(const WeightMatrix& w)
      : data(reinterpret_cast<const uint8_t*>(w.data)),
        scales(reinterpret_cast<const uint8_t*>(w.scale)),
        cols(w.cols) {
    table = _mm512_load_si512(tables().fp4);
    // Rotating the 4 codes left by 23 - 8g puts code g in a float's exponent field: no
    // shuffle (the scarce unit: decoding is shuffles).
    rotate = _mm512_setr_epi32(23, 23, 23, 23, 15, 15, 15, 15, 7, 7, 7, 7, 31, 31, 31, 31);
    exponent = _mm512_set1_epi32(0x7F800000);
  }
  [[gnu::always_inline]] void nibbles(Vi b, Vi* w) const {
    w[0] = _mm512_permutexvar_epi16(b, table);
    w[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(b, 4), table);
    w[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(b, 8), table);
    w[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(b, 12), table);
  }
  // The E8M0 codes of 4 groups as floats, lanes 4g .. 4g + 3 for group g; absent groups 0.
  V group_scales(const uint8_t* p, int64_t groups) const {
    // No memcpy of a variable size: a library call would clobber every vector register.
    uint32_t codes = 0;
    if (groups >= 4) {
      std::memcpy(&codes, p, 4);
    } else {
      for (int64_t g = 0; g < groups; ++g) codes |= uint32_t{p[g]} << (8 * g);
    }
    // Codes 0 (2^-127, a float32 subnormal) and 255 (NaN) are not e << 23: rare, slow.
    const uint32_t present = groups >= 4 ? ~0u : (1u << (8 * groups)) - 1;
    const uint32_t probe = codes | (0x01010101u & ~present);
    const auto has_zero_byte = [](uint32_t v) { return (v - 0x01010101u) & ~v & 0x80808080u; };
    if ((has_zero_byte(probe) | has_zero_byte(~probe)) != 0) {
      alignas(64) float s[16] = {};
      for (int i = 0; i < 16; ++i) s[i] = i / 4 < groups ? e8m0_to_float(p[i / 4]) : 0.f;
      return _mm512_load_ps(s);
    }
    const Vi e = _mm512_rolv_epi32(_mm512_set1_epi32(static_cast<int>(codes)), rotate);
    return _mm512_castsi512_ps(_mm512_and_si512(e, exponent));
  }
  static constexpr int kChunkBytes = kChunk / 2;
  const void* at(int64_t r, int64_t c) const { return data + (r * cols + c) / 2; }
  bool regular(int64_t r0, int64_t r1) const {
    return e8m0_codes_regular(scales + r0 * (cols / 32),
                              static_cast<uint64_t>((r1 - r0) * (cols / 32)));
  }
  struct Row {
    const uint8_t* p;
    const uint8_t* codes;
  };
  Row row(int64_t r) const { return {data + r * cols / 2, scales + r * (cols / 32)}; }
  [[gnu::always_inline]] void whole(const Row& row, int64_t c, Vi* w, V* scale) const {
    const Vi b = _mm512_loadu_si512(row.p + c / 2);
    nibbles(b, w);
    float four;  // a broadcast load of 4 codes, rotated as in group_scales
    std::memcpy(&four, row.codes + c / 32, 4);
    const Vi e = _mm512_rolv_epi32(_mm512_castps_si512(_mm512_set1_ps(four)), rotate);
    *scale = _mm512_castsi512_ps(_mm512_and_si512(e, exponent));
  }
  void chunk(int64_t r, int64_t c, int64_t valid, Vi* w, V* scale) const {
    const Vi b = load_bytes(data + (r * cols + c) / 2, valid / 2);
    nibbles(b, w);
    *scale = group_scales(scales + r * (cols / 32) + c / 32, std::min<int64_t>(4, valid / 32));
  }
};

// Prepared x: n rows of `stride` bf16 (cols rounded up to whole chunks), each chunk in its
// decode order.
int64_t x_stride(const WeightMatrix& w) { return (w.cols + kChunk - 1) / kChunk * kChunk; }

// x to bf16 (exact by the caller's promise; checked in debug builds), each chunk's 128
// words permuted to the decode order: two 64-word permutes, merged by a mask.
void prepare_x_bf16(const WeightMatrix& w, const float* x, int64_t n, uint16_t* out) {
  const Tables& t = tables();
  const int s = format_slot(w.format);
  const int64_t cols = w.cols, xs = x_stride(w);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < cols; c += kChunk) {
      const float* src = x + i * cols + c;
      Vi nat[4];
      for (int v = 0; v < 4; ++v) {
        const int64_t at = 32 * v;
        const V a =
            _mm512_maskz_loadu_ps(static_cast<__mmask16>(first_bits(cols - c - at)), src + at);
        const V b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(first_bits(cols - c - at - 16)),
                                          src + at + 16);
        FLINT_DCHECK(
            _mm512_test_epi32_mask(_mm512_castps_si512(a), _mm512_set1_epi32(0xFFFF)) == 0 &&
                _mm512_test_epi32_mask(_mm512_castps_si512(b), _mm512_set1_epi32(0xFFFF)) == 0,
            "matmul: x declared bf16-exact is not");
        nat[v] = (Vi)_mm512_cvtne2ps_pbh(b, a);
      }
      uint16_t* dst = out + i * xs + c;
      for (int v = 0; v < 4; ++v) {
        const Vi idx = _mm512_load_si512(t.perm_idx[s][v]);
        const Vi low = _mm512_permutex2var_epi16(nat[0], idx, nat[1]);
        const Vi high = _mm512_permutex2var_epi16(nat[2], idx, nat[3]);
        _mm512_store_si512(dst + 32 * v, _mm512_mask_blend_epi16(t.perm_hi[s][v], low, high));
      }
    }
  }
}

}  // namespace
}  // namespace flint::kernels::detail

#undef FLINT_UNROLL
