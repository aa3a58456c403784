// matmul for calls whose x is exactly bf16 (matmul.h), on AVX-512 BF16 + VBMI: weights are
// decoded to bf16 in registers with byte permutes and multiplied with vdpbf16ps, 32 columns
// per instruction; the block scales multiply float32 partial sums. Summation order and
// column layout: matmul_isa.h.
//
// Cost per 128 columns of one row (n = 1): FP8 2 x (2 vpermi2b + 1 vpternlogd + 2 unpacks),
// FP4 (3 shifts, 4 vpermw) + a 4-group scale vector; then 4 vdpbf16ps
// and 1 FMA per input, against 8 (FP8) or 4 (FP4) decode steps + 8 FMAs in the float32
// variant. x is converted to bf16 once per call, permuted to the weight's decode order.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Every header with inline functions is included before the target region: they must stay
// compiled for the baseline CPU (the linker may keep this copy).
#include "base/check.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "formats/weight.h"
#include "kernels/matmul_isa.h"

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(                                                                \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma")
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/hsum_avx512.h"

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

// One chunk of one (row, input) pair: the only arithmetic of both paths.
template <bool kScaled>
inline V chunk_dot(V acc, const Vi* w, V scale, const uint16_t* x) {
  if constexpr (kScaled) {
    V part = _mm512_setzero_ps();
    FLINT_UNROLL
    for (int v = 0; v < 4; ++v)
      part = _mm512_dpbf16_ps(part, (__m512bh)w[v], (__m512bh)_mm512_load_si512(x + 32 * v));
    return _mm512_fmadd_ps(part, scale, acc);
  } else {
    FLINT_UNROLL
    for (int v = 0; v < 4; ++v)
      acc = _mm512_dpbf16_ps(acc, (__m512bh)w[v], (__m512bh)_mm512_load_si512(x + 32 * v));
    return acc;
  }
}

// y[t, r0 + r] = (first block) or += the horizontal sums of acc.
template <int R, int T>
[[gnu::always_inline]] inline void flush(V (&acc)[R][T], int64_t r0, bool first, float* y,
                                         int64_t ldy) {
  static_assert(R * T <= 16);
  if constexpr (R == 4 && T >= 2) {  // one input: the tree of 4 alone is shorter
    flush_rows4_avx512<T>(acc, r0, first, y, ldy);
  } else {
    V v[R * T];
    FLINT_UNROLL
    for (int i = 0; i < R * T; ++i) v[i] = acc[i % R][i / R];
    float h[R * T];
    hsums_avx512<R * T>(v, h);
    FLINT_UNROLL
    for (int t = 0; t < T; ++t) {
      FLINT_UNROLL
      for (int r = 0; r < R; ++r) {
        float& out = y[t * ldy + r0 + r];
        out = first ? h[t * R + r] : out + h[t * R + r];
      }
    }
  }
}

// Prepared x: n rows of `stride` bf16 (cols rounded up to whole chunks), each chunk in its
// decode order.
int64_t x_stride(const WeightMatrix& w) { return (w.cols + kChunk - 1) / kChunk * kChunk; }

template <class D>
struct Kernel {
  // ---- direct path (n <= 4): R rows decoded in registers against T inputs ----------------
  // One chunk of R rows against T > 1 inputs: the rows decoded first, then each x vector
  // loaded once and used by every row (chunk_dot per (row, input) would load it R times).
  // Each (row, input) chain adds the same products in the same order as chunk_dot.
  template <int R, int T, bool kWhole>
  [[gnu::always_inline]] static void chunk_rows(const D& d, const typename D::Row (&rows)[R],
                                                int64_t r0, int64_t c, int64_t valid,
                                                const uint16_t* x, int64_t xs, V (&acc)[R][T]) {
    Vi wv[R][4];
    V scale[R];
    FLINT_UNROLL
    for (int r = 0; r < R; ++r) {
      if constexpr (kWhole)
        d.whole(rows[r], c, wv[r], &scale[r]);
      else
        d.chunk(r0 + r, c, valid, wv[r], &scale[r]);
    }
    V part[R][T];
    FLINT_UNROLL
    for (int r = 0; r < R; ++r) FLINT_UNROLL
    for (int t = 0; t < T; ++t) part[r][t] = D::kScaled ? _mm512_setzero_ps() : acc[r][t];
    FLINT_UNROLL
    for (int v = 0; v < 4; ++v) {
      FLINT_UNROLL
      for (int t = 0; t < T; ++t) {
        Vi xv = _mm512_load_si512(x + t * xs + 32 * v);
        asm("" : "+v"(xv));  // one load per vector (matmul_driver.h: load_pinned)
        FLINT_UNROLL
        for (int r = 0; r < R; ++r)
          part[r][t] = _mm512_dpbf16_ps(part[r][t], (__m512bh)wv[r][v], (__m512bh)xv);
      }
    }
    FLINT_UNROLL
    for (int r = 0; r < R; ++r) FLINT_UNROLL
    for (int t = 0; t < T; ++t)
      acc[r][t] = D::kScaled ? _mm512_fmadd_ps(part[r][t], scale[r], acc[r][t]) : part[r][t];
  }

  // Row min(r0 + r + ahead, last row) is prefetched as row r0 + r is read
  // (kPrefetchAheadBytes). kWhole: whole chunks with regular scales (direct_rows).
  template <int R, int T, bool kWhole>
  static void direct(const D& d, const WeightMatrix& w, const uint16_t* x, int64_t r0,
                     int64_t ahead, float* y) {
    const int64_t cols = w.cols, xs = x_stride(w);
    const char* next[R];
    typename D::Row rows[R];
    FLINT_UNROLL
    for (int r = 0; r < R; ++r) {
      next[r] = static_cast<const char*>(d.at(std::min(r0 + r + ahead, w.rows - 1), 0));
      rows[r] = d.row(r0 + r);
    }
    if constexpr (std::is_same_v<D, Fp4Decoder>) {  // its scale codes: a stream of their own
      FLINT_UNROLL
      for (int r = 0; r < R; ++r)
        _mm_prefetch(
            reinterpret_cast<const char*>(d.row(std::min(r0 + r + ahead, w.rows - 1)).codes),
            _MM_HINT_T1);
    }
    for (int64_t k0 = 0; k0 < cols; k0 += kBlock) {
      V acc[R][T];
      FLINT_UNROLL
      for (auto& row : acc) FLINT_UNROLL
      for (auto& a : row) a = _mm512_setzero_ps();
      const int64_t k1 = std::min(cols, k0 + kBlock);
      for (int64_t c = k0; c < k1; c += kChunk) {
        FLINT_UNROLL
        for (int r = 0; r < R; ++r) {
          const char* p = next[r] + c / kChunk * D::kChunkBytes;
          FLINT_UNROLL
          for (int line = 0; line < D::kChunkBytes; line += 64) _mm_prefetch(p + line, _MM_HINT_T1);
          if constexpr (T == 1) {
            Vi wv[4];
            V scale;
            if constexpr (kWhole)
              d.whole(rows[r], c, wv, &scale);
            else
              d.chunk(r0 + r, c, k1 - c, wv, &scale);
            acc[r][0] = chunk_dot<D::kScaled>(acc[r][0], wv, scale, x + c);
          }
        }
        if constexpr (T > 1) chunk_rows<R, T, kWhole>(d, rows, r0, c, k1 - c, x + c, xs, acc);
      }
      flush<R, T>(acc, r0, k0 == 0, y, w.rows);
    }
  }

  // Whole chunks of rows with regular scales, the common case, take the decode without
  // masks and checks; one irregular scale sends the whole range to the checked one. A
  // matrix marked regular (WeightMatrix::regular_scales, the model's weights) skips the
  // scan, which read each unit's scales before its data (about 4% of FP4 expert time).
  template <int T>
  static void direct_rows(const D& d, const WeightMatrix& w, const uint16_t* x, int64_t r0,
                          int64_t r1, float* y) {
    if (w.cols % kChunk == 0 && (w.regular_scales || d.regular(r0, r1)))
      direct_range<T, true>(d, w, x, r0, r1, y);
    else
      direct_range<T, false>(d, w, x, r0, r1, y);
  }
  template <int T, bool kWhole>
  static void direct_range(const D& d, const WeightMatrix& w, const uint16_t* x, int64_t r0,
                           int64_t r1, float* y) {
    int64_t r = r0;
    // R x T accumulators beside the decoder's tables and temporaries (BF16 has none).
    constexpr int R = T <= 2 || !D::kScaled ? 4 : 2;
    const int64_t ahead = prefetch_rows_ahead(w, R);
    for (; r + R <= r1; r += R) direct<R, T, kWhole>(d, w, x, r, ahead, y);
    for (; r < r1; ++r) direct<1, T, kWhole>(d, w, x, r, ahead, y);
  }

  // ---- tiled path (n > 4): 16 rows x 512 columns decoded once to an L1 buffer -------------
  struct Tile {
    alignas(64) uint16_t w[kTileRows][kBlock];
    alignas(64) float scale[kTileRows][kChunksPerBlock][16];
  };

  // Rows [tr, tr + R) of the tile against inputs [t0, t0 + T), chunks [0, chunks). The
  // same operations per (row, input) as chunk_dot, interleaved so that each loaded vector
  // serves R or T products: R + T loads per R x T vdpbf16ps.
  template <int R, int T>
  static void micro(const Tile& tile, int tr, const uint16_t* x, int64_t xs, int64_t t0, int64_t k0,
                    int64_t chunks, int64_t r_abs, float* y, int64_t ldy) {
    V acc[R][T];
    FLINT_UNROLL
    for (auto& row : acc) FLINT_UNROLL
    for (auto& a : row) a = _mm512_setzero_ps();
    for (int64_t ch = 0; ch < chunks; ++ch) {
      V part[R][T];
      FLINT_UNROLL
      for (auto& row : part) FLINT_UNROLL
      for (auto& a : row) a = _mm512_setzero_ps();
      V(&sum)[R][T] = D::kScaled ? part : acc;
      FLINT_UNROLL
      for (int v = 0; v < 4; ++v) {
        // Scaled: R x T partial sums beside R x T accumulators leave GCC short of registers,
        // and unpinned it reloaded every x vector once per row (16 loads per 12 products,
        // the loop load-bound; FP8 at 16 inputs in L2, 1 thread: 110 -> 134 GFLOP/s pinned).
        // BF16 keeps the loads foldable into vdpbf16ps.
        Vi wv[R];
        FLINT_UNROLL
        for (int r = 0; r < R; ++r) {
          wv[r] = _mm512_load_si512(tile.w[tr + r] + ch * kChunk + 32 * v);
          if constexpr (D::kScaled) asm("" : "+v"(wv[r]));
        }
        FLINT_UNROLL
        for (int t = 0; t < T; ++t) {
          Vi xv = _mm512_load_si512(x + (t0 + t) * xs + k0 + ch * kChunk + 32 * v);
          if constexpr (D::kScaled) asm("" : "+v"(xv));
          FLINT_UNROLL
          for (int r = 0; r < R; ++r)
            sum[r][t] = _mm512_dpbf16_ps(sum[r][t], (__m512bh)wv[r], (__m512bh)xv);
        }
      }
      if constexpr (D::kScaled) {
        FLINT_UNROLL
        for (int r = 0; r < R; ++r) {
          const V scale = _mm512_load_ps(tile.scale[tr + r][ch]);
          FLINT_UNROLL
          for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(part[r][t], scale, acc[r][t]);
        }
      }
    }
    flush<R, T>(acc, r_abs, k0 == 0, y + t0 * ldy, ldy);
  }

  // The register tile: 4 rows (a tile's 16 rows without remainder) x kMicroT inputs; a
  // scaled chunk needs a partial sum beside each accumulator, so 3 inputs there (2 x 12
  // accumulators + 4 rows + 1 input of 32 registers).
  static constexpr int kMicroRows = 4;
  static constexpr int kMicroT = D::kScaled ? 3 : 4;

  // Rows [tr, tr + R) against inputs [t, t + T) for T = min(kMicroT, n - t).
  template <int R, int T = kMicroT>
  static void micro_upto(const Tile& tile, int tr, const uint16_t* x, int64_t xs, int64_t n,
                         int64_t t, int64_t k0, int64_t chunks, int64_t r_abs, float* y,
                         int64_t ldy) {
    if constexpr (T > 0) {
      if (n - t >= T) return micro<R, T>(tile, tr, x, xs, t, k0, chunks, r_abs, y, ldy);
      micro_upto<R, T - 1>(tile, tr, x, xs, n, t, k0, chunks, r_abs, y, ldy);
    }
  }

  static void tiled(const D& d, const WeightMatrix& w, const uint16_t* x, int64_t n, int64_t r0,
                    int64_t r1, float* y) {
    Tile tile;
    const int64_t cols = w.cols, xs = x_stride(w);
    for (int64_t tr = r0; tr < r1; tr += kTileRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kTileRows, r1 - tr));
      for (int64_t k0 = 0; k0 < cols; k0 += kBlock) {
        const int64_t k1 = std::min(cols, k0 + kBlock);
        const int64_t chunks = (k1 - k0 + kChunk - 1) / kChunk;
        for (int r = 0; r < rows; ++r) {
          prefetch_tile_block(w, tr + r + kTileRows, k0, k1);
          for (int64_t ch = 0; ch < chunks; ++ch) {
            Vi wv[4];
            V scale = _mm512_setzero_ps();
            d.chunk(tr + r, k0 + ch * kChunk, k1 - k0 - ch * kChunk, wv, &scale);
            FLINT_UNROLL
            for (int v = 0; v < 4; ++v) _mm512_store_si512(tile.w[r] + ch * kChunk + 32 * v, wv[v]);
            _mm512_store_ps(tile.scale[r][ch], scale);
          }
        }
        // Inputs outer: kMicroT inputs' block of x (4 KB at most) stays in L1 beside the
        // tile (16 KB) while every row of the tile passes over it.
        for (int64_t t = 0; t < n; t += kMicroT) {
          int r = 0;
          for (; r + kMicroRows <= rows; r += kMicroRows)
            micro_upto<kMicroRows>(tile, r, x, xs, n, t, k0, chunks, tr + r, y, w.rows);
          for (; r < rows; ++r) micro_upto<1>(tile, r, x, xs, n, t, k0, chunks, tr + r, y, w.rows);
        }
      }
    }
  }

  static void rows(const WeightMatrix& w, const void* xv, int64_t n, int64_t r0, int64_t r1,
                   float* y) {
    const D d(w);
    const auto* x = static_cast<const uint16_t*>(xv);
    switch (n) {
      case 1:
        return direct_rows<1>(d, w, x, r0, r1, y);
      case 2:
        return direct_rows<2>(d, w, x, r0, r1, y);
      case 3:
        return direct_rows<3>(d, w, x, r0, r1, y);
      case kDirectMaxN:
        return direct_rows<kDirectMaxN>(d, w, x, r0, r1, y);
      default:
        return tiled(d, w, x, n, r0, r1, y);
    }
  }
};

void rows(const WeightMatrix& w, const void* x, int64_t n, int64_t r0, int64_t r1, float* y) {
  switch (w.format) {
    case WeightFormat::kBF16:
      return Kernel<Bf16Decoder>::rows(w, x, n, r0, r1, y);
    case WeightFormat::kFp8Block128:
      return Kernel<Fp8Decoder>::rows(w, x, n, r0, r1, y);
    case WeightFormat::kFp4Mx32:
      return Kernel<Fp4Decoder>::rows(w, x, n, r0, r1, y);
    case WeightFormat::kF32:
      break;
  }
  FLINT_CHECK(false, "avx512bf16 matmul: unsupported weight format");
}

bool supports(WeightFormat f) { return f != WeightFormat::kF32; }

int64_t scratch_bytes(const WeightMatrix& w, int64_t n) { return n * x_stride(w) * 2; }

// x to bf16 (exact by the caller's promise; checked in debug builds), each chunk's 128
// words permuted to the decode order: two 64-word permutes, merged by a mask.
const void* prepare_x(const WeightMatrix& w, const float* x, int64_t n, void* scratch) {
  const Tables& t = tables();
  const int s = format_slot(w.format);
  const int64_t cols = w.cols, xs = x_stride(w);
  auto* out = static_cast<uint16_t*>(scratch);
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
  return out;
}

}  // namespace
}  // namespace flint::kernels::detail

#undef FLINT_UNROLL

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif  // __x86_64__

namespace flint::kernels::detail {

const MatmulIsa* matmul_isa_avx512_bf16() {
#if defined(__x86_64__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512bf16") &&
                         __builtin_cpu_supports("avx512vbmi");
  static const MatmulIsa isa{"avx512bf16", &scratch_bytes, &prepare_x, &rows, &supports, true};
  return ok ? &isa : nullptr;
#else
  return nullptr;
#endif
}

}  // namespace flint::kernels::detail
