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

#include "kernels/bf16_decode.h"
#include "kernels/hsum_avx512.h"

#define FLINT_UNROLL _Pragma("GCC unroll 16")

namespace flint::kernels::detail {
namespace {

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

bool supports(const WeightMatrix& w) { return w.format != WeightFormat::kF32; }

int64_t scratch_bytes(const WeightMatrix& w, int64_t n) { return n * x_stride(w) * 2; }

const void* prepare_x(const WeightMatrix& w, const float* x, int64_t n, void* scratch) {
  auto* out = static_cast<uint16_t*>(scratch);
  prepare_x_bf16(w, x, n, out);
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
