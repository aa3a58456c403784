// The loops of the SIMD matmul variants, written once over an instruction-set policy `I`
// (matmul_avx512.cpp, matmul_avx2.cpp). Include this only inside such a file's target
// region, so that every function here is compiled for that instruction set.
//
// I provides: kLanes, V (a vector of kLanes floats), zero/load/store/fma/set1, hsums<N>(v, out)
// (out[i] = the horizontal sum of v[i] for N <= kLanes vectors, matmul_isa.h's order),
// optionally flush_rows4<T> (flush() for 4 rows, the same sums), and the
// exact decoders bf16(p), fp8(p, s) (codes times s, s = scale * 2^8), fp4_table(scale) and
// fp4(p, table, lo, hi) (kLanes bytes: lo = the even columns, hi = the odd ones).
//
// Two paths, same arithmetic (matmul_isa.h states the summation order):
//  - direct (n <= 4, decode): 4 rows at a time, each weight decoded in registers once and
//    multiplied with the n inputs; nothing is written but y.
//  - tiled (n > 4, prefill): 16 rows x 512 columns decoded to float32 in an L1-sized buffer,
//    then a 4-row x kMicroT-input register tile, so each weight is decoded once per call;
//    float32 and BF16 weights skip the buffer (read in place, BF16 widened in registers).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"
#include "formats/weight.h"

// The register tiles below live in arrays indexed by compile-time loop counters: they stay
// in registers only if those loops are unrolled completely (GCC does not at -O2).
#define FLINT_UNROLL _Pragma("GCC unroll 16")

namespace flint::kernels::detail {

// Column blocks of one horizontal reduction (a multiple of every format's scale group).
inline constexpr int64_t kMatmulBlock = 512;

// Reads one weight row chunk by chunk, in the column order of the format's x layout: kGroup
// columns share a scale (begin_group loads it), a chunk is kStep columns = kStep / kLanes
// vectors (decode writes them).
template <class I, WeightFormat F>
struct WeightReader;

template <class I>
struct WeightReader<I, WeightFormat::kF32> {
  static constexpr int64_t kGroup = kMatmulBlock, kStep = I::kLanes;
  const float* row = nullptr;
  void init(const WeightMatrix& w, int64_t r) {
    row = reinterpret_cast<const float*>(w.data) + r * w.cols;
  }
  static constexpr bool slow = false;
  void begin_group(int64_t) {}
  static constexpr int64_t kStepBytes = 4 * kStep;
  const void* at(int64_t c) const { return row + c; }
  void decode(int64_t c, typename I::V* out) const { out[0] = I::load(row + c); }
  void decode_slow(int64_t c, typename I::V* out) const { decode(c, out); }
};

template <class I>
struct WeightReader<I, WeightFormat::kBF16> {
  static constexpr int64_t kGroup = kMatmulBlock, kStep = I::kLanes;
  const uint16_t* row = nullptr;
  void init(const WeightMatrix& w, int64_t r) {
    row = reinterpret_cast<const uint16_t*>(w.data) + r * w.cols;
  }
  static constexpr bool slow = false;
  void begin_group(int64_t) {}
  static constexpr int64_t kStepBytes = 2 * kStep;
  const void* at(int64_t c) const { return row + c; }
  void decode(int64_t c, typename I::V* out) const { out[0] = I::bf16(row + c); }
  void decode_slow(int64_t c, typename I::V* out) const { decode(c, out); }
};

// Scale number s of an FP8 weight (row-major over its 128 x 128 blocks). Static: each ISA
// file compiles its own copy for its instruction set (an inline function would be merged
// across them by the linker, which could run an AVX-512 copy on an AVX2 machine).
static float fp8_block_scale(const WeightMatrix& w, int64_t s) {
  return w.scale_dtype == DType::F32 ? reinterpret_cast<const float*>(w.scale)[s]
                                     : e8m0_to_float(reinterpret_cast<const uint8_t*>(w.scale)[s]);
}

// The code's bits placed in an FP16 are its value times 2^-8 (subnormal codes too), so
// multiplying by scale * 2^8 decodes and scales in one exact step (the product is the same
// single rounding of code * scale that dequantize_rows computes). A scale of 2^120 or more
// would overflow that factor: such blocks are decoded element by element.
template <class I>
struct WeightReader<I, WeightFormat::kFp8Block128> {
  static constexpr int64_t kGroup = 128, kStep = I::kLanes;
  const WeightMatrix* w = nullptr;
  const uint8_t* row = nullptr;
  int64_t r = 0, scale_row = 0;
  typename I::V factor{};
  bool slow = false;
  void init(const WeightMatrix& m, int64_t row_index) {
    w = &m;
    r = row_index;
    row = reinterpret_cast<const uint8_t*>(m.data) + r * m.cols;
    scale_row = (r / 128) * ((m.cols + 127) / 128);
  }
  void begin_group(int64_t c) {
    const int64_t s = scale_row + c / 128;
    const float scale = fp8_block_scale(*w, s);
    const float f = scale * 0x1p8f;
    slow = !std::isfinite(f);
    factor = I::set1(f);
  }
  static constexpr int64_t kStepBytes = kStep;
  const void* at(int64_t c) const { return row + c; }
  void decode(int64_t c, typename I::V* out) const { out[0] = I::fp8(row + c, factor); }
  // The same values element by element, for a block whose factor overflowed.
  void decode_slow(int64_t c, typename I::V* out) const {
    alignas(64) float tmp[I::kLanes];
    const float* table = fp8_e4m3_table();
    const int64_t s = scale_row + c / 128;
    const float scale = fp8_block_scale(*w, s);
    for (int i = 0; i < I::kLanes; ++i) tmp[i] = table[row[c + i]] * scale;
    out[0] = I::load(tmp);
  }
};

// kLanes bytes hold 2 * kLanes columns: the even ones (low nibbles), then the odd ones.
template <class I>
struct WeightReader<I, WeightFormat::kFp4Mx32> {
  static constexpr int64_t kGroup = 32, kStep = 2 * I::kLanes;
  static constexpr bool slow = false;
  const uint8_t* row = nullptr;
  const uint8_t* scales = nullptr;
  typename I::Table table{};
  void init(const WeightMatrix& w, int64_t r) {
    row = reinterpret_cast<const uint8_t*>(w.data) + r * w.cols / 2;
    scales = reinterpret_cast<const uint8_t*>(w.scale) + r * (w.cols / 32);
  }
  void begin_group(int64_t c) {
    // e8m0_to_float without branches (codes 0 and 255 are rare but valid).
    const uint32_t code = scales[c / 32];
    uint32_t bits = code << 23;
    bits = code == 0 ? 0x00400000u : bits;
    bits = code == 255 ? 0x7FC00000u : bits;
    float scale;
    std::memcpy(&scale, &bits, 4);
    table = I::fp4_table(scale);
  }
  static constexpr int64_t kStepBytes = kStep / 2;
  const void* at(int64_t c) const { return row + c / 2; }
  void decode(int64_t c, typename I::V* out) const { I::fp4(row + c / 2, table, out[0], out[1]); }
  void decode_slow(int64_t c, typename I::V* out) const { decode(c, out); }
};

template <class I>
struct MatmulDriver {
  using V = typename I::V;
  static constexpr int W = I::kLanes;
  static constexpr int64_t kBlock = kMatmulBlock;
  static constexpr int kTileRows = 16;
  // Inputs of the register tile (4 rows x kMicroT accumulators, + 4 rows + 1 input).
  static constexpr int kMicroT = I::kLanes == 16 ? 6 : 4;

  // Value of element (r, c), natural layout (the partial last chunk; never kFp4Mx32).
  static float element(const WeightMatrix& w, int64_t r, int64_t c) {
    switch (w.format) {
      case WeightFormat::kF32:
        return reinterpret_cast<const float*>(w.data)[r * w.cols + c];
      case WeightFormat::kBF16:
        return bf16_to_float(reinterpret_cast<const uint16_t*>(w.data)[r * w.cols + c]);
      case WeightFormat::kFp8Block128: {
        const int64_t s = (r / 128) * ((w.cols + 127) / 128) + c / 128;
        return fp8_e4m3_to_float(reinterpret_cast<const uint8_t*>(w.data)[r * w.cols + c]) *
               fp8_block_scale(w, s);
      }
      case WeightFormat::kFp4Mx32:
        break;
    }
    return NAN;
  }

  // A partial chunk [c, c + count) of row r (count < W), zero-padded.
  static V tail(const WeightMatrix& w, int64_t r, int64_t c, int64_t count) {
    alignas(64) float tmp[W] = {};
    for (int64_t i = 0; i < count; ++i) tmp[i] = element(w, r, c + i);
    return I::load(tmp);
  }

  // Prefetches the cache lines that start within the chunk at c of each row, moved
  // ahead_bytes on (rows are contiguous: that is a later row of the same matrix).
  template <class Rd, int R>
  static void prefetch(const Rd (&rd)[R], int64_t c, int64_t ahead_bytes) {
    FLINT_UNROLL
    for (int r = 0; r < R; ++r) {
      const char* p = static_cast<const char*>(rd[r].at(c)) + ahead_bytes;
      const auto offset = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) % 64);
      for (int64_t line = offset == 0 ? 0 : 64 - offset; line < Rd::kStepBytes; line += 64)
        _mm_prefetch(p + line, _MM_HINT_T1);
    }
  }

  // ---- the decoding loop shared by both paths ----------------------------------------
  // Calls step(c, wv) for each full chunk of columns [c0, c1) of rows r0 .. r0 + R - 1
  // (wv[r][j]: row r's vector j) and tail(c, count, wv) for a partial last chunk. With
  // ahead_bytes > 0, the bytes that far past each chunk are prefetched (matmul_isa.h).
  template <WeightFormat F, int R, class Step, class Tail>
  static void for_chunks(const WeightMatrix& w, int64_t r0, int64_t c0, int64_t c1,
                         int64_t ahead_bytes, Step&& step, Tail&& tail_fn) {
    using Rd = WeightReader<I, F>;
    constexpr int kVecs = Rd::kStep / W;
    Rd rd[R];
    FLINT_UNROLL
    for (int r = 0; r < R; ++r) rd[r].init(w, r0 + r);
    for (int64_t g0 = c0; g0 < c1; g0 += Rd::kGroup) {
      const int64_t g1 = std::min(c1, g0 + Rd::kGroup);
      FLINT_UNROLL
      for (int r = 0; r < R; ++r) rd[r].begin_group(g0);
      bool slow = false;
      FLINT_UNROLL
      for (int r = 0; r < R; ++r) slow |= rd[r].slow;
      int64_t c = g0;
      if (!slow) {  // the loop that matters: no branch inside
        for (; c + Rd::kStep <= g1; c += Rd::kStep) {
          if (ahead_bytes > 0) prefetch<Rd, R>(rd, c, ahead_bytes);
          V wv[R][kVecs];
          FLINT_UNROLL
          for (int r = 0; r < R; ++r) rd[r].decode(c, wv[r]);
          step(c, wv);
        }
      } else {
        for (; c + Rd::kStep <= g1; c += Rd::kStep) {
          V wv[R][kVecs];
          FLINT_UNROLL
          for (int r = 0; r < R; ++r) rd[r].decode_slow(c, wv[r]);
          step(c, wv);
        }
      }
      if (c < g1) {
        V wv[R][1];
        FLINT_UNROLL
        for (int r = 0; r < R; ++r) wv[r][0] = tail(w, r0 + r, c, g1 - c);
        tail_fn(c, g1 - c, wv);
      }
    }
  }

  // h[i] = the horizontal sums of v[i], i < N, in groups of up to kLanes at once.
  template <int N, int From = 0>
  [[gnu::always_inline]] static void hsums(const V* v, float* h) {
    if constexpr (From < N) {
      constexpr int kCount = std::min(N - From, W);
      I::template hsums<kCount>(v + From, h + From);
      hsums<N, From + kCount>(v, h);
    }
  }

  // y[t, r] += (or = for the first block) the horizontal sums of acc. An ISA may store 4
  // rows' sums per input at once (I::flush_rows4: no round trip of the sums through memory);
  // for one input the prefix tree of hsums is shorter.
  template <int R, int T>
  [[gnu::always_inline]] static void flush(V (&acc)[R][T], int64_t r0, bool first, float* y,
                                           int64_t ldy) {
    if constexpr (R == 4 && T >= 2 &&
                  requires { I::template flush_rows4<T>(acc, r0, first, y, ldy); }) {
      I::template flush_rows4<T>(acc, r0, first, y, ldy);
    } else {
      V v[R * T];
      FLINT_UNROLL
      for (int i = 0; i < R * T; ++i) v[i] = acc[i % R][i / R];
      float h[R * T];
      hsums<R * T>(v, h);
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

  // ---- direct path ----------------------------------------------------------------------
  // Row r0 + ahead + r is prefetched as row r0 + r is read (none past the matrix).
  template <WeightFormat F, int R, int T>
  static void direct(const WeightMatrix& w, const float* x, int64_t r0, int64_t ahead, float* y) {
    const int64_t cols = w.cols;
    const int64_t ahead_bytes = r0 + R + ahead <= w.rows ? ahead * row_data_bytes(w) : 0;
    for (int64_t k0 = 0; k0 < cols; k0 += kBlock) {
      const int64_t k1 = std::min(cols, k0 + kBlock);
      V acc[R][T];
      FLINT_UNROLL
      for (auto& row : acc) FLINT_UNROLL
      for (auto& a : row) a = I::zero();
      for_chunks<F, R>(
          w, r0, k0, k1, ahead_bytes,
          [&](int64_t c, auto& wv) {
            constexpr int kVecs = sizeof(wv[0]) / sizeof(V);
            FLINT_UNROLL
            for (int j = 0; j < kVecs; ++j) {
              FLINT_UNROLL
              for (int t = 0; t < T; ++t) {
                const V xv = I::load(x + t * cols + c + j * W);
                FLINT_UNROLL
                for (int r = 0; r < R; ++r) acc[r][t] = I::fma(wv[r][j], xv, acc[r][t]);
              }
            }
          },
          [&](int64_t c, int64_t count, auto& wv) {
            FLINT_UNROLL
            for (int t = 0; t < T; ++t) {
              alignas(64) float tmp[W] = {};
              std::memcpy(tmp, x + t * cols + c, static_cast<size_t>(count) * sizeof(float));
              const V xv = I::load(tmp);
              FLINT_UNROLL
              for (int r = 0; r < R; ++r) acc[r][t] = I::fma(wv[r][0], xv, acc[r][t]);
            }
          });
      flush<R, T>(acc, r0, k0 == 0, y, w.rows);
    }
  }

  template <WeightFormat F, int T>
  static void direct_rows(const WeightMatrix& w, const float* x, int64_t r0, int64_t r1, float* y) {
    int64_t r = r0;
    const int64_t ahead = prefetch_rows_ahead(w, 4);
    for (; r + 4 <= r1; r += 4) direct<F, 4, T>(w, x, r, ahead, y);
    for (; r < r1; ++r) direct<F, 1, T>(w, x, r, ahead, y);
  }

  template <WeightFormat F>
  static void direct_any_n(const WeightMatrix& w, const float* x, int64_t n, int64_t r0, int64_t r1,
                           float* y) {
    switch (n) {
      case 1:
        return direct_rows<F, 1>(w, x, r0, r1, y);
      case 2:
        return direct_rows<F, 2>(w, x, r0, r1, y);
      case 3:
        return direct_rows<F, 3>(w, x, r0, r1, y);
      default:
        return direct_rows<F, 4>(w, x, r0, r1, y);
    }
  }

  // ---- tiled path -------------------------------------------------------------------------
  // Keeps v in a register: GCC 12 otherwise folds the load of a vector used by several FMAs
  // into each of them (one load per FMA instead of one per vector), and the register tile
  // becomes bound by loads.
  static V load_pinned(const float* p) {
    V v = I::load(p);
    asm("" : "+v"(v));
    return v;
  }

  // Where micro reads weight rows: the decoded tile, or for float32 and BF16 the weight
  // itself (decoding BF16 is a widening shift: in registers it costs less than a tile's
  // stores and reloads). load(r, p): row r's W columns from block column p; load_tail(r,
  // p, count): the row's last count < W columns, zero past them.
  struct TileRows {
    const float* tile;  // row r at tile + r * kBlock
    V load(int r, int64_t p) const { return load_pinned(tile + r * kBlock + p); }
    V load_tail(int r, int64_t p, int64_t) const { return I::load(tile + r * kBlock + p); }
    void prefetch(int, int64_t) const {}  // tiled() prefetches while it decodes the tile
  };
  template <WeightFormat F>
  struct InPlaceRows {
    using T = std::conditional_t<F == WeightFormat::kF32, float, uint16_t>;
    const T* row0;  // row r's block at row0 + r * cols
    int64_t cols;
    // Elements from a row to the one a tile further, which prefetch() fetches into L2 one
    // line at a time as micro reads a line (0: none). Issued as one burst per block, the
    // prefetches waited for miss buffers: 12% of the BF16 head's samples at 16 inputs.
    int64_t ahead = 0;
    void prefetch(int r, int64_t p) const {
      if (ahead != 0 && (p * static_cast<int64_t>(sizeof(T))) % 64 == 0)
        _mm_prefetch(reinterpret_cast<const char*>(row0 + r * cols + p + ahead), _MM_HINT_T1);
    }
    static V decode(const T* p) {
      if constexpr (F == WeightFormat::kF32) {
        return load_pinned(p);
      } else {
        return I::bf16(p);
      }
    }
    V load(int r, int64_t p) const { return decode(row0 + r * cols + p); }
    V load_tail(int r, int64_t p, int64_t count) const {
      alignas(64) T tmp[W] = {};
      std::memcpy(tmp, row0 + r * cols + p, static_cast<size_t>(count) * sizeof(T));
      return decode(tmp);
    }
  };

  // Rows [0, R) of `rows` (the block of columns [k0, k0 + len)) times inputs [t0, t0 + T).
  template <int R, int T, class Rows>
  static void micro(const Rows& rows, const float* x, int64_t cols, int64_t t0, int64_t k0,
                    int64_t len, int64_t r_abs, float* y, int64_t ldy) {
    V acc[R][T];
    FLINT_UNROLL
    for (auto& row : acc) FLINT_UNROLL
    for (auto& a : row) a = I::zero();
    const int64_t full = len / W * W;
    for (int64_t p = 0; p < full; p += W) {
      V wv[R];
      FLINT_UNROLL
      for (int r = 0; r < R; ++r) {
        rows.prefetch(r, p);
        wv[r] = rows.load(r, p);
      }
      FLINT_UNROLL
      for (int t = 0; t < T; ++t) {
        const V xv = load_pinned(x + (t0 + t) * cols + k0 + p);
        FLINT_UNROLL
        for (int r = 0; r < R; ++r) acc[r][t] = I::fma(wv[r], xv, acc[r][t]);
      }
    }
    if (full < len) {
      V wv[R];
      FLINT_UNROLL
      for (int r = 0; r < R; ++r) wv[r] = rows.load_tail(r, full, len - full);
      FLINT_UNROLL
      for (int t = 0; t < T; ++t) {
        alignas(64) float tmp[W] = {};
        std::memcpy(tmp, x + (t0 + t) * cols + k0 + full,
                    static_cast<size_t>(len - full) * sizeof(float));
        const V xv = I::load(tmp);
        FLINT_UNROLL
        for (int r = 0; r < R; ++r) acc[r][t] = I::fma(wv[r], xv, acc[r][t]);
      }
    }
    flush<R, T>(acc, r_abs, k0 == 0, y + t0 * ldy, ldy);
  }

  // Inputs [t0, t0 + left) with left < kMicroT: one micro of that many.
  template <int R, class Rows, int T = kMicroT - 1>
  static void rest(const Rows& rows, const float* x, int64_t cols, int64_t left, int64_t t0,
                   int64_t k0, int64_t len, int64_t r_abs, float* y, int64_t ldy) {
    if constexpr (T > 0) {
      if (left == T) return micro<R, T>(rows, x, cols, t0, k0, len, r_abs, y, ldy);
      rest<R, Rows, T - 1>(rows, x, cols, left, t0, k0, len, r_abs, y, ldy);
    }
  }

  // The tile's rows [0, rows) (absolute row tr) against every input, for block [k0, k1).
  // Each output gets one micro per block whatever the loop order, so its sum is the same.
  // kInputsOuter: one input group's block of x (kMicroT x 512 floats) stays in L1 while
  // every row group of the tile uses it; for weights read in place (BF16, float32), whose
  // rows come from L2, rows outer made each row group walk the whole block of x (32 KB for
  // 16 inputs), which with the rows overflowed L1 (BM_MatmulHead/16, the 129,280 x 1024
  // BF16 head: median of 8 alternating runs 138.5 -> 150.5 GFLOP/s). A decoded tile (32 KB
  // of float32) stays in L1 better with its rows outer (FP8 and FP4 at 128 inputs measured
  // slower with inputs outer).
  template <bool kInputsOuter, class RowsAt>
  static void tile_products(const RowsAt& rows_at, int64_t rows, const float* x, int64_t cols,
                            int64_t n, int64_t k0, int64_t k1, int64_t tr, float* y, int64_t ldy) {
    const int64_t len = k1 - k0;
    // micro<R, T> of rows [r, r + R) and inputs [t, t + T); T = kMicroT or the rest.
    auto one = [&]<int R>(int64_t r, int64_t t) {
      if (n - t >= kMicroT)
        return micro<R, kMicroT>(rows_at(r, t), x, cols, t, k0, len, tr + r, y, ldy);
      rest<R>(rows_at(r, t), x, cols, n - t, t, k0, len, tr + r, y, ldy);
    };
    auto row_groups = [&](int64_t t) {
      int64_t r = 0;
      for (; r + 4 <= rows; r += 4) one.template operator()<4>(r, t);
      for (; r < rows; ++r) one.template operator()<1>(r, t);
    };
    if constexpr (kInputsOuter) {
      for (int64_t t = 0; t < n; t += kMicroT) row_groups(t);
    } else {
      int64_t r = 0;
      for (; r + 4 <= rows; r += 4)
        for (int64_t t = 0; t < n; t += kMicroT) one.template operator()<4>(r, t);
      for (; r < rows; ++r)
        for (int64_t t = 0; t < n; t += kMicroT) one.template operator()<1>(r, t);
    }
  }

  template <WeightFormat F>
  static void tiled(const WeightMatrix& w, const float* x, int64_t n, int64_t r0, int64_t r1,
                    float* y) {
    constexpr bool kInPlace = F == WeightFormat::kF32 || F == WeightFormat::kBF16;
    alignas(64) float tile[kInPlace ? 1 : kTileRows * kBlock];
    const int64_t cols = w.cols;
    for (int64_t tr = r0; tr < r1; tr += kTileRows) {
      const int64_t rows = std::min<int64_t>(kTileRows, r1 - tr);
      for (int64_t k0 = 0; k0 < cols; k0 += kBlock) {
        const int64_t k1 = std::min(cols, k0 + kBlock);
        if constexpr (!kInPlace) {
          for (int64_t r = 0; r < rows; ++r) {
            prefetch_tile_block(w, tr + r + kTileRows, k0, k1);
            float* dst = tile + r * kBlock;
            for_chunks<F, 1>(
                w, tr + r, k0, k1, /*ahead_bytes=*/0,
                [&](int64_t c, auto& wv) {
                  constexpr int kVecs = sizeof(wv[0]) / sizeof(V);
                  FLINT_UNROLL
                  for (int j = 0; j < kVecs; ++j) I::store(dst + (c - k0) + j * W, wv[0][j]);
                },
                [&](int64_t c, int64_t, auto& wv) { I::store(dst + (c - k0), wv[0][0]); });
          }
        }
        if constexpr (kInPlace) {
          using Rows = InPlaceRows<F>;
          const auto* data = reinterpret_cast<const typename Rows::T*>(w.data);
          // The first input group's pass reads every row of the tile once: it prefetches
          // the next tile's (only whole tiles inside the matrix).
          const int64_t ahead = tr + kTileRows + rows <= w.rows ? kTileRows * cols : 0;
          tile_products<true>(
              [&](int64_t r, int64_t t) {
                return Rows{data + (tr + r) * cols + k0, cols, t == 0 ? ahead : 0};
              },
              rows, x, cols, n, k0, k1, tr, y, w.rows);
        } else {
          tile_products<false>([&](int64_t r, int64_t) { return TileRows{tile + r * kBlock}; },
                               rows, x, cols, n, k0, k1, tr, y, w.rows);
        }
      }
    }
  }

  template <WeightFormat F>
  static void rows_for(const WeightMatrix& w, const float* x, int64_t n, int64_t r0, int64_t r1,
                       float* y) {
    if (n <= kDirectMaxN) {
      direct_any_n<F>(w, x, n, r0, r1, y);
    } else {
      tiled<F>(w, x, n, r0, r1, y);
    }
  }

  static void rows(const WeightMatrix& w, const void* xv, int64_t n, int64_t r0, int64_t r1,
                   float* y) {
    const float* x = static_cast<const float*>(xv);
    switch (w.format) {
      case WeightFormat::kF32:
        return rows_for<WeightFormat::kF32>(w, x, n, r0, r1, y);
      case WeightFormat::kBF16:
        return rows_for<WeightFormat::kBF16>(w, x, n, r0, r1, y);
      case WeightFormat::kFp8Block128:
        return rows_for<WeightFormat::kFp8Block128>(w, x, n, r0, r1, y);
      case WeightFormat::kFp4Mx32:
        return rows_for<WeightFormat::kFp4Mx32>(w, x, n, r0, r1, y);
    }
  }

  // FP4 reads a chunk's even columns, then its odd ones: x is permuted to match.
  static int64_t scratch_bytes(const WeightMatrix& w, int64_t n) {
    return w.format == WeightFormat::kFp4Mx32 ? n * w.cols * 4 : 0;
  }
  static bool supports(const WeightMatrix&) { return true; }
  static const void* prepare_x(const WeightMatrix& w, const float* x, int64_t n, void* out) {
    if (w.format != WeightFormat::kFp4Mx32) return x;
    float* scratch = static_cast<float*>(out);
    const int64_t total = n * w.cols;  // cols is a multiple of 32, so of 2W
    for (int64_t b = 0; b < total; b += 2 * W) {
      for (int j = 0; j < W; ++j) {
        scratch[b + j] = x[b + 2 * j];
        scratch[b + W + j] = x[b + 2 * j + 1];
      }
    }
    return scratch;
  }
};

}  // namespace flint::kernels::detail

#undef FLINT_UNROLL
