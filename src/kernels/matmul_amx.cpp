// matmul for calls whose x is exactly bf16 (matmul.h) on CPUs with AMX-BF16 (Intel Xeon
// since Sapphire Rapids), chosen by name only (--matmul-kernels amx; matmul.h says why):
// weights decoded to bf16 with their power-of-two scale folded in, 16 rows x 512 columns at
// a time into an L1 buffer, and multiplied with tdpbf16ps, 16 rows x 32 columns x up to 16
// inputs per instruction (8192 multiply-adds in about 16 cycles, where vdpbf16ps does 512).
//
// Arithmetic: every weight is decoded exactly (E4M3 and E2M1 codes are bf16 values, and
// adding the E8M0 scale's exponent keeps them exact while the scale code is in [10, 246]);
// each product is exact, and the tile unit sums 32 of them per instruction in an order of
// its own (not the two rounded adds per pair its documentation lists: measured here), into
// one float32 chain per output over the row's columns in chunk order. That sequence is the
// same for every input count, thread count and row range, so prefill, incremental decode
// and batches of any size give the same bits. Rows whose scale code lies outside [10, 246]
// (never in a trained checkpoint; tests make them) are computed element by element.
//
// Calls without the bf16 promise on BF16 weights (the output head's float32 hidden state)
// come here too when amx is chosen: x is split into bf16 hi + mid + lo, which sum to it
// exactly, and each step takes three products (3 x the work, still exact products and
// float32 sums).
//
// The column order within a chunk is the avx512bf16 variant's (bf16_decode.h): the decoders
// are shared, and x is permuted to match once per call.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

// Headers with inline functions before the target region (matmul_avx512_bf16.cpp says why).
#include "base/check.h"
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "formats/weight.h"
#include "kernels/matmul_isa.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__clang__)
#pragma clang attribute push(                                                                      \
    __attribute__((target(                                                                         \
        "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma,xsave,amx-tile,amx-bf16"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi,fma,xsave,amx-tile,amx-bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/bf16_decode.h"

#define FLINT_UNROLL _Pragma("GCC unroll 16")

namespace flint::kernels::detail {
namespace {

constexpr int kTile = 16;    // weight rows per A tile; inputs per B tile
constexpr int kStep = 32;    // columns per tdpbf16ps: one A tile row of bf16
constexpr int kMaxPass = 2;  // input tiles per pass over a block: C in tmm0, tmm1

// Scale codes whose exponent can be added to every decoded E4M3 / E2M1 value without leaving
// bf16's normal range (E4M3 spans 2^-9 .. 448, E2M1 0.5 .. 6).
constexpr uint8_t kFoldMin = 10, kFoldMax = 246;

// Inputs per B tile for a call of n inputs (the tile shapes of the call).
int64_t inputs_per_tile(int64_t n) { return std::min<int64_t>(kTile, n); }
int64_t input_tiles(int64_t n) { return (n + kTile - 1) / kTile; }
int64_t steps(const WeightMatrix& w) { return x_stride(w) / kStep; }

// Prepared x, per part (1 part for a bf16-exact x; 3 for a float32 x split into bf16 hi +
// mid + lo, which sum to it exactly): the permuted bf16 rows [n][x_stride] (bf16_decode.h),
// then, for n > 1, B tiles [input tile][step]: 16 rows (column pairs of the step) x nt
// dwords (one per input; zero past n). For n = 1 the permuted row itself is that B tile (16
// rows of one dword).
int64_t rows_bytes(const WeightMatrix& w, int64_t n) {
  return (n * x_stride(w) * 2 + 63) / 64 * 64;
}
int64_t part_bytes(const WeightMatrix& w, int64_t n) {
  const int64_t nt = inputs_per_tile(n);
  return rows_bytes(w, n) + (nt > 1 ? input_tiles(n) * steps(w) * kTile * nt * 4 : 0);
}
int64_t scratch_bytes(const WeightMatrix& w, int64_t n) { return part_bytes(w, n); }
int64_t split_scratch_bytes(const WeightMatrix& w, int64_t n) { return 3 * part_bytes(w, n); }

// out[j] = dword j of every in[i]: a 16 x 16 transpose (unpacks of 32 and 64 bits, then
// 128-bit lanes).
void transpose16(const Vi (&in)[16], Vi (&out)[16]) {
  Vi a[16], b[16];
  FLINT_UNROLL
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm512_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
  }
  FLINT_UNROLL
  for (int k = 0; k < 4; ++k) {  // b[4k + j], lane L: inputs 4k .. 4k+3 at dword 4L + j
    b[4 * k] = _mm512_unpacklo_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = _mm512_unpackhi_epi64(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = _mm512_unpacklo_epi64(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm512_unpackhi_epi64(a[4 * k + 1], a[4 * k + 3]);
  }
  FLINT_UNROLL
  for (int j = 0; j < 4; ++j) {
    const Vi u0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44);
    const Vi u1 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xEE);
    const Vi u2 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
    const Vi u3 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xEE);
    out[j] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    out[4 + j] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
    out[8 + j] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    out[12 + j] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
  }
}

// One part: x (bf16-exact) permuted and, for n > 1, transposed into B tiles at `part`.
void prepare_part(const WeightMatrix& w, const float* x, int64_t n, char* part) {
  auto* perm = reinterpret_cast<uint16_t*>(part);
  prepare_x_bf16(w, x, n, perm);
  const int64_t nt = inputs_per_tile(n), xs = x_stride(w), st = steps(w);
  if (nt == 1) return;
  auto* tiles = reinterpret_cast<uint32_t*>(part + rows_bytes(w, n));
  const auto store_mask = static_cast<__mmask16>((1u << nt) - 1);
  for (int64_t g = 0; g < input_tiles(n); ++g) {
    for (int64_t s = 0; s < st; ++s) {
      Vi in[16], out[16];
      FLINT_UNROLL
      for (int i = 0; i < 16; ++i) {
        const int64_t t = g * kTile + i;
        in[i] = t < n ? _mm512_load_si512(perm + t * xs + s * kStep) : _mm512_setzero_si512();
      }
      transpose16(in, out);
      uint32_t* b = tiles + (g * st + s) * kTile * nt;
      FLINT_UNROLL
      for (int j = 0; j < 16; ++j) _mm512_mask_storeu_epi32(b + j * nt, store_mask, out[j]);
    }
  }
}

const void* prepare_x(const WeightMatrix& w, const float* x, int64_t n, void* scratch) {
  prepare_part(w, x, n, static_cast<char*>(scratch));
  return scratch;
}

// x = hi + mid + lo, each bf16 (round to nearest, then the exact remainders: 8 + 8 + 8
// significant bits hold float32's 24; only parts below 2^-126 are lost, which the tile unit
// would flush anyway).
const void* prepare_split_x(const WeightMatrix& w, const float* x, int64_t n, void* scratch) {
  thread_local std::vector<float> parts;
  const int64_t count = n * w.cols;
  parts.resize(static_cast<size_t>(3 * count));
  float* hi = parts.data();
  float* mid = hi + count;
  float* lo = mid + count;
  const auto to_bf16 = [](V v) {  // round to nearest even, as float32
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v)), 16));
  };
  for (int64_t i = 0; i < count; i += 16) {
    const auto mask = static_cast<__mmask16>(first_bits(count - i));
    const V v = _mm512_maskz_loadu_ps(mask, x + i);
    const V h = to_bf16(v);
    const V r = _mm512_sub_ps(v, h);
    const V m = to_bf16(r);
    _mm512_mask_storeu_ps(hi + i, mask, h);
    _mm512_mask_storeu_ps(mid + i, mask, m);
    _mm512_mask_storeu_ps(lo + i, mask, _mm512_sub_ps(r, m));
  }
  auto* out = static_cast<char*>(scratch);
  for (int p = 0; p < 3; ++p)
    prepare_part(w, parts.data() + p * count, n, out + p * part_bytes(w, n));
  return scratch;
}

// The palette-1 tile shapes of a call with nt inputs per B tile: tmm0, 1 C (16 rows x nt
// floats), tmm2, 3 A (16 rows x 32 bf16), tmm4 .. 7 B (16 column pairs x nt inputs). Loaded for
// the call, released after it (an unreleased tile state makes every context switch save 8 KB).
struct TileScope {
  explicit TileScope(int64_t nt) {
    alignas(64) uint8_t cfg[64] = {};
    cfg[0] = 1;  // palette
    auto shape = [&](int t, int rows, int colsb) {
      cfg[48 + t] = static_cast<uint8_t>(rows);
      const auto c = static_cast<uint16_t>(colsb);
      std::memcpy(cfg + 16 + 2 * t, &c, 2);
    };
    for (int t : {0, 1, 4, 5, 6, 7}) shape(t, kTile, static_cast<int>(4 * nt));
    for (int t : {2, 3}) shape(t, kTile, 2 * kStep);
    _tile_loadconfig(cfg);
  }
  ~TileScope() { _tile_release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

// Adds each lane's scale exponent (a power of two as float bits, lanes 2i, 2i+1 of the words)
// to the nonzero words of w: exact for foldable codes; zeros stay zero.
[[gnu::always_inline]] inline void fold(Vi* w, V scale) {
  const Vi t = _mm512_srli_epi32(_mm512_castps_si512(scale), 16);  // code << 7 per lane
  const Vi add =
      _mm512_sub_epi16(_mm512_or_si512(t, _mm512_slli_epi32(t, 16)), _mm512_set1_epi16(127 << 7));
  FLINT_UNROLL
  for (int v = 0; v < 4; ++v) {
    const __mmask32 nonzero = _mm512_test_epi16_mask(w[v], _mm512_set1_epi16(0x7FFF));
    w[v] = _mm512_mask_add_epi16(w[v], nonzero, w[v], add);
  }
}

// E4M3's bf16 words (magnitudes 0 .. 127), from bf16_decode.h's byte tables, and which of
// them take a scale (1 .. 126: not zero, not NaN).
struct Fp8Words {
  Vi words[4];
  __mmask32 scaled[4];
};
const Fp8Words& fp8_words() {
  static const Fp8Words built = [] {
    alignas(64) uint16_t w[128];
    const Tables& t = tables();
    for (int m = 0; m < 128; ++m) w[m] = static_cast<uint16_t>(t.fp8_lo[m] | t.fp8_hi[m] << 8);
    Fp8Words f{};
    for (int q = 0; q < 4; ++q) {
      f.words[q] = _mm512_load_si512(w + 32 * q);
      uint32_t mask = 0;
      for (int j = 0; j < 32; ++j) {
        const int m = 32 * q + j;
        if (m != 0 && m != 127) mask |= 1u << j;
      }
      f.scaled[q] = mask;
    }
    return f;
  }();
  return built;
}

// The decoder's tables with the scale of `code` (foldable) in them: the block's rows then
// decode already scaled (per 16 rows x 128 columns: 20 operations, against 24 to fold each
// row's words).
void scale_fp8_tables(Fp8Decoder& d, int code) {
  const Fp8Words& f = fp8_words();
  const Vi add = _mm512_set1_epi16(static_cast<int16_t>((code - 127) * 128));
  Vi w[4];
  FLINT_UNROLL
  for (int q = 0; q < 4; ++q)
    w[q] = _mm512_mask_add_epi16(f.words[q], f.scaled[q], f.words[q], add);
  auto join = [](__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  };
  d.lo0 = join(_mm512_cvtepi16_epi8(w[0]), _mm512_cvtepi16_epi8(w[1]));
  d.lo1 = join(_mm512_cvtepi16_epi8(w[2]), _mm512_cvtepi16_epi8(w[3]));
  d.hi0 = join(_mm512_cvtepi16_epi8(_mm512_srli_epi16(w[0], 8)),
               _mm512_cvtepi16_epi8(_mm512_srli_epi16(w[1], 8)));
  d.hi1 = join(_mm512_cvtepi16_epi8(_mm512_srli_epi16(w[2], 8)),
               _mm512_cvtepi16_epi8(_mm512_srli_epi16(w[3], 8)));
}

// Whether every scale code in [p, p + count) is foldable (64 at a time).
bool codes_foldable(const uint8_t* p, int64_t count) {
  const Vi lo = _mm512_set1_epi8(static_cast<char>(kFoldMin));
  const Vi hi = _mm512_set1_epi8(static_cast<char>(kFoldMax));
  __mmask64 bad = 0;
  for (int64_t i = 0; i < count; i += 64) {
    const __mmask64 valid = first_bits(count - i);
    const Vi c = _mm512_maskz_loadu_epi8(valid, p + i);
    bad |= _mm512_mask_cmplt_epu8_mask(valid, c, lo) | _mm512_mask_cmpgt_epu8_mask(valid, c, hi);
  }
  return bad == 0;
}

// Columns decoded at a time: 16 rows x 512 bf16 = 16 KB, which stays in L1 until the tile
// unit reads it (a whole 16-row tile of 4096 columns, 128 KB, went through L2 at about 45
// GB/s of stores and ran 2-3 times slower).
constexpr int64_t kBlockCols = 512;

// Where vector v of chunk c (relative to the block) of tile row i goes in the block buffer:
// [step][16 rows][32 words], so each step's A tile is 1 KB in one piece.
inline uint16_t* at(uint16_t* buf, int i, int64_t c, int v) {
  return buf + ((c / kStep + v) * kTile + i) * kStep;
}

// Bit i: row r + i of the tile has a scale code that cannot be folded (rows_of computes it
// element by element; its words in the buffer are not used).
template <class D>
uint32_t slow_rows(const D& d, const WeightMatrix& w, int64_t r, int m) {
  if constexpr (std::is_same_v<D, Fp8Decoder>) {
    const int64_t per_row = (w.cols + 127) / 128;  // one scale row: the tile is in one block
    const uint8_t* codes = reinterpret_cast<const uint8_t*>(w.scale) + r / 128 * per_row;
    return codes_foldable(codes, per_row) ? 0 : (1u << m) - 1;
  } else if constexpr (D::kScaled) {
    // FP4's rows have codes of their own (contiguous): the tile's at once, row by row only
    // when one is not foldable.
    const int64_t per_row = w.cols / 32;
    if (codes_foldable(d.scales + r * per_row, m * per_row)) return 0;
    uint32_t slow = 0;
    for (int i = 0; i < m; ++i)
      if (!codes_foldable(d.scales + (r + i) * per_row, per_row)) slow |= 1u << i;
    return slow;
  } else {
    return 0;
  }
}

// Columns [k0, k1) of tile rows [r, r + m) decoded, scales folded, into buf (at()). Rows
// m .. 15 keep whatever they held: an A row only ever reaches its own C row, never stored.
template <class D>
void decode_block(const D& base, const WeightMatrix& w, int64_t r, int m, int64_t k0, int64_t k1,
                  bool whole, uint32_t slow, uint16_t* buf) {
  const int64_t cols = w.cols;
  if constexpr (std::is_same_v<D, Fp8Decoder>) {
    if (slow != 0) return;
    const int64_t per_row = (cols + 127) / 128;
    const uint8_t* codes = reinterpret_cast<const uint8_t*>(w.scale) + r / 128 * per_row;
    D d = base;
    for (int64_t c = k0; c < k1; c += kChunk) {
      scale_fp8_tables(d, codes[c / kChunk]);
      for (int i = 0; i < m; ++i) {
        Vi wv[4];
        V scale;
        if (whole) {
          d.whole(d.row(r + i), c, wv, &scale);
        } else {
          d.chunk(r + i, c, cols - c, wv, &scale);
        }
        FLINT_UNROLL
        for (int v = 0; v < 4; ++v) _mm512_store_si512(at(buf, i, c - k0, v), wv[v]);
      }
    }
  } else {
    for (int i = 0; i < m; ++i) {
      if ((slow >> i) & 1u) continue;
      const typename D::Row row = base.row(r + i);
      for (int64_t c = k0; c < k1; c += kChunk) {
        Vi wv[4];
        V scale = _mm512_setzero_ps();
        if (whole) {
          base.whole(row, c, wv, &scale);
        } else {
          base.chunk(r + i, c, cols - c, wv, &scale);
        }
        if constexpr (D::kScaled) fold(wv, scale);
        FLINT_UNROLL
        for (int v = 0; v < 4; ++v) _mm512_store_si512(at(buf, i, c - k0, v), wv[v]);
      }
    }
  }
}

// Steps [0, sb) of the block in buf against P <= 2 input tiles (b: the first one's B tile at this
// block's first step; the second's next_tile dwords further), each of kParts parts
// (part_dwords apart, added in part order): C in tmm0, tmm1, zeroed (first block), loaded
// from cm (a later block when C does not stay in the registers) or kept; stored to cm when
// `store`. Consecutive steps alternate between two A registers (tmm2, 3) and two sets of B
// registers (even steps tmm4, 5, 6; odd ones tmm6, 7, or with 3 parts tmm7, 1, 4), so that
// a step's loads need not wait for the previous step's products.
template <int P, int kParts>
void pass(const uint16_t* buf, const uint32_t* b, int64_t next_tile, int64_t part_dwords,
          int64_t sb, int64_t nt, bool zero, bool load, bool store, float* const* cm) {
  static_assert((P == 1 || P == 2) && (kParts == 1 || (kParts == 3 && P == 1)));
  const auto b_stride = static_cast<int>(nt * 4);
  const int64_t b_tile_dwords = kTile * nt;
  if (zero) {
    _tile_zero(0);
    if constexpr (P > 1) _tile_zero(1);
  } else if (load) {
    _tile_loadd(0, cm[0], b_stride);
    if constexpr (P > 1) _tile_loadd(1, cm[1], b_stride);
  }
  // One step into A register `ra`: with input tiles, B registers rb0 (tile 0) and rb1 (tile 1);
  // with parts, rb0, rb1, rb2 (parts 0, 1, 2). Two macros, because clang checks the tile
  // numbers of every product written, even in a discarded `if constexpr` branch.
#define FLINT_AMX_TILES(s, ra, rb0, rb1)                             \
  do {                                                               \
    const uint32_t* bs = b + (s)*b_tile_dwords;                      \
    _tile_loadd(ra, buf + (s)*kTile * kStep, 2 * kStep);             \
    _tile_loadd(rb0, bs, b_stride);                                  \
    if constexpr (P > 1) _tile_loadd(rb1, bs + next_tile, b_stride); \
    _tile_dpbf16ps(0, ra, rb0);                                      \
    if constexpr (P > 1) _tile_dpbf16ps(1, ra, rb1);                 \
  } while (0)
#define FLINT_AMX_PARTS(s, ra, rb0, rb1, rb2)            \
  do {                                                   \
    const uint32_t* bs = b + (s)*b_tile_dwords;          \
    _tile_loadd(ra, buf + (s)*kTile * kStep, 2 * kStep); \
    _tile_loadd(rb0, bs, b_stride);                      \
    _tile_loadd(rb1, bs + part_dwords, b_stride);        \
    _tile_dpbf16ps(0, ra, rb0);                          \
    _tile_dpbf16ps(0, ra, rb1);                          \
    _tile_loadd(rb2, bs + 2 * part_dwords, b_stride);    \
    _tile_dpbf16ps(0, ra, rb2);                          \
  } while (0)
  int64_t s = 0;
  if constexpr (kParts > 1) {
    for (; s + 2 <= sb; s += 2) {
      FLINT_AMX_PARTS(s, 2, 4, 5, 6);
      FLINT_AMX_PARTS(s + 1, 3, 7, 1, 4);  // tmm1 is free with one input tile
    }
    if (s < sb) FLINT_AMX_PARTS(s, 2, 4, 5, 6);
  } else {
    for (; s + 2 <= sb; s += 2) {
      FLINT_AMX_TILES(s, 2, 4, 5);
      FLINT_AMX_TILES(s + 1, 3, 6, 7);
    }
    if (s < sb) FLINT_AMX_TILES(s, 2, 4, 5);
  }
#undef FLINT_AMX_PARTS
#undef FLINT_AMX_TILES
  if (store) {
    _tile_stored(0, cm[0], b_stride);
    if constexpr (P > 1) _tile_stored(1, cm[1], b_stride);
  }
}

// Row r of the weight against the n permuted rows, element by element in float32 (code
// times scale, times x, summed in chunk order): the rows whose scales cannot be folded.
template <class D>
void slow_row(const D& d, const WeightMatrix& w, const uint16_t* perm, int64_t n, int64_t r,
              float* y) {
  const int64_t cols = w.cols, xs = x_stride(w);
  for (int64_t t = 0; t < n; ++t) {
    float acc = 0;
    for (int64_t c = 0; c < cols; c += kChunk) {
      Vi wv[4];
      V scale = _mm512_setzero_ps();
      d.chunk(r, c, cols - c, wv, &scale);
      alignas(64) uint16_t words[128];
      alignas(64) float s[16];
      for (int v = 0; v < 4; ++v) _mm512_store_si512(words + 32 * v, wv[v]);
      _mm512_store_ps(s, scale);
      for (int v = 0; v < 4; ++v) {
        for (int j = 0; j < 32; ++j) {
          const float wt = D::kScaled ? bf16_to_float(words[32 * v + j]) * s[j / 2]
                                      : bf16_to_float(words[32 * v + j]);
          acc += wt * bf16_to_float(perm[t * xs + c + 32 * v + j]);
        }
      }
    }
    y[t * w.rows + r] = acc;
  }
}

template <class D, int kParts>
void rows_of(const WeightMatrix& w, const void* xv, int64_t n, int64_t r0, int64_t r1, float* y) {
  const D d(w);
  const auto* perm = static_cast<const uint16_t*>(xv);  // part 0's rows (slow_row's x)
  const int64_t nt = inputs_per_tile(n), st = steps(w), tiles = input_tiles(n);
  const int64_t cols = w.cols, padded = x_stride(w);
  // B tiles: the permuted row itself for one input (16 dwords per step), else the
  // transposed tiles after the rows; parts one after the other.
  const auto* b = reinterpret_cast<const uint32_t*>(static_cast<const char*>(xv) +
                                                    (nt == 1 ? 0 : rows_bytes(w, n)));
  const int64_t b_tile_dwords = kTile * nt, part_dwords = part_bytes(w, n) / 4;
  // The block buffer (16 KB) and C of every input tile (1 KB each), 64-byte aligned.
  thread_local std::vector<float> storage;
  const auto need = static_cast<size_t>(kTile * kBlockCols / 2 + tiles * kTile * kTile + 16);
  if (storage.size() < need) storage.resize(need);
  float* base = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 / 4;
  auto* buf = reinterpret_cast<uint16_t*>(base);
  float* cmem = base + kTile * kBlockCols / 2;
  const bool whole = cols % kChunk == 0 && (w.regular_scales || d.regular(r0, r1));
  // Up to kMaxPass input tiles (one with 3 parts) keep C in the tile registers over the whole
  // row; more go through cmem after every block (the same values: float32 stored and loaded
  // exactly).
  const int64_t per_pass = kParts > 1 ? 1 : kMaxPass;
  const bool in_registers = tiles <= per_pass;
  const TileScope scope(nt);
  for (int64_t r = r0; r < r1;) {
    int64_t end = std::min(r1, r + kTile);
    if constexpr (std::is_same_v<D, Fp8Decoder>) end = std::min(end, (r / 128 + 1) * 128);
    const int m = static_cast<int>(end - r);
    const uint32_t slow = slow_rows(d, w, r, m);
    // BF16 weights are copied too: read in place, a tile's rows (4096 columns: 8 KB apart)
    // all fell into one L1 set, and 16 inputs ran 3 times slower than from the buffer.
    for (int64_t k0 = 0; k0 < padded; k0 += kBlockCols) {
      const int64_t k1 = std::min(padded, k0 + kBlockCols);
      decode_block(d, w, r, m, k0, std::min(cols, k1), whole, slow, buf);
      const int64_t s0 = k0 / kStep, sb = (k1 - k0) / kStep;
      const bool first = k0 == 0, last = k1 == padded;
      for (int64_t g = 0; g < tiles; g += per_pass) {
        float* const cm[2] = {cmem + g * kTile * kTile, cmem + (g + 1) * kTile * kTile};
        const uint32_t* bg = b + (g * st + s0) * b_tile_dwords;
        const bool load = !first && !in_registers, store = last || !in_registers;
        if constexpr (kParts > 1) {
          pass<1, kParts>(buf, bg, st * b_tile_dwords, part_dwords, sb, nt, first, load, store, cm);
        } else if (tiles - g == 1) {
          pass<1, 1>(buf, bg, st * b_tile_dwords, 0, sb, nt, first, load, store, cm);
        } else {
          pass<2, 1>(buf, bg, st * b_tile_dwords, 0, sb, nt, first, load, store, cm);
        }
      }
    }
    for (int64_t g = 0; g < tiles; ++g) {
      const float* c = cmem + g * kTile * kTile;
      const int64_t t0 = g * kTile, count = std::min<int64_t>(nt, n - t0);
      for (int i = 0; i < m; ++i) {
        for (int64_t t = 0; t < count; ++t) y[(t0 + t) * w.rows + r + i] = c[i * nt + t];
      }
    }
    if constexpr (kParts == 1) {
      for (int i = 0; i < m; ++i) {
        if ((slow >> i) & 1u) slow_row(d, w, perm, n, r + i, y);
      }
    }
    r = end;
  }
}

void rows(const WeightMatrix& w, const void* x, int64_t n, int64_t r0, int64_t r1, float* y) {
  switch (w.format) {
    case WeightFormat::kBF16:
      return rows_of<Bf16Decoder, 1>(w, x, n, r0, r1, y);
    case WeightFormat::kFp8Block128:
      return rows_of<Fp8Decoder, 1>(w, x, n, r0, r1, y);
    case WeightFormat::kFp4Mx32:
      return rows_of<Fp4Decoder, 1>(w, x, n, r0, r1, y);
    case WeightFormat::kF32:
      break;
  }
  FLINT_CHECK(false, "amx matmul: unsupported weight format");
}

void split_rows(const WeightMatrix& w, const void* x, int64_t n, int64_t r0, int64_t r1, float* y) {
  FLINT_CHECK(w.format == WeightFormat::kBF16, "amx matmul: split x takes BF16 weights only");
  rows_of<Bf16Decoder, 3>(w, x, n, r0, r1, y);
}
bool split_supports(const WeightMatrix& w) { return w.format == WeightFormat::kBF16; }

// FP8 blocks with float32 scales (the -Base experts) cannot be folded into bf16 exactly.
bool supports(const WeightMatrix& w) {
  return w.format == WeightFormat::kBF16 || w.format == WeightFormat::kFp4Mx32 ||
         (w.format == WeightFormat::kFp8Block128 && w.scale_dtype == DType::F8_E8M0);
}

// AMX needs the CPU's AMX-TILE and AMX-BF16 (CPUID 7.0:EDX bits 24, 22), the OS's tile
// state in XCR0 (bits 17, 18), and Linux's permission for this process to use it.
bool amx_usable() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1) || !((d >> 22) & 1))
    return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return false;  // OSXSAVE
  if ((_xgetbv(0) & (3u << 17)) != (3u << 17)) return false;
  constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
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
#endif  // __x86_64__ && __linux__

namespace flint::kernels::detail {

const MatmulIsa* matmul_isa_amx() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512bf16") &&
                         __builtin_cpu_supports("avx512vbmi") && amx_usable();
  static const MatmulIsa split{"amx (float32 x as 3 bf16)",
                               &split_scratch_bytes,
                               &prepare_split_x,
                               &split_rows,
                               &split_supports,
                               false,
                               kTile,
                               true};
  static const MatmulIsa isa{"amx", &scratch_bytes, &prepare_x, &rows, &supports,
                             true,  kTile,          true,       &split};
  return ok ? &isa : nullptr;
#else
  return nullptr;
#endif
}

}  // namespace flint::kernels::detail
