// The instruction-set variants of matmul (internal to kernels/; see matmul.h for the API).
//
// Each variant computes rows [r0, r1) of y = x . W^T for all n inputs, reading the weight in
// place in its own format. matmul.cpp splits rows over the thread pool and picks the best
// variant the CPU has at first use; tests and benchmarks may pin one (set_matmul_isa).
//
// Summation order, the contract every SIMD variant keeps: an output is the sum over blocks
// of 512 columns, in column order, of one horizontal reduction per block of `lanes` partial
// sums, each a chain of fused multiply-adds over its columns in ascending order. That order
// is the same whatever n, the row range or the thread count, so prefill, incremental decode
// and batches of any size give bit-identical results. The scalar variant (the reference)
// dequantises rows to float32 and uses dot(); variants differ from it by float32 rounding.
//
// The avx512bf16 variant (bf16_inputs: only for calls whose x is exactly bf16) keeps the
// same outer order with 16 lanes and a different chain. Weights are decoded to bf16 without
// their block scale (E4M3 and E2M1 values are exact in bf16) and multiplied with vdpbf16ps,
// which for lane i adds word 2i+1's exact product, then word 2i's, each add rounded to
// float32 (checked on Zen 5; bf16 subnormal inputs, a subnormal accumulator and subnormal
// sums count as zero). A block is read in chunks of 128 columns = 4 vectors of 32 words;
// word j of vector v (0..3) of a chunk holds column
//   BF16: 32v + j;  FP8: 64(v/2) + 16(j/8) + 8(v%2) + j%8;  FP4: 4j + v
// of it (past the last column: zero). BF16: each lane's partial sum is one vdpbf16ps chain
// over the block's chunks and vectors in order. FP8 and FP4: per chunk, a chain starting
// from zero over its 4 vectors, then lane sum = fma(chain, scale, lane sum), where scale is
// the chunk's FP8 block scale, or for FP4 the scale of 32-column group j/8 (lanes 4g..4g+3
// hold group g). The horizontal reduction is the avx512 one (halves: 8, 4, 2, 1 lanes).
#pragma once

#include <algorithm>
#include <cstdint>

#include "formats/weight.h"

namespace flint::kernels::detail {

// Up to this many inputs, every variant reads rows in groups of at most 4 against all inputs
// in registers (the decode path); above it, tiles of 16 rows.
inline constexpr int kDirectMaxN = 4;

struct MatmulIsa {
  const char* name;
  // Bytes of scratch prepare_x needs (0: it never copies x).
  int64_t (*scratch_bytes)(const WeightMatrix& w, int64_t n);
  // x in the layout rows() reads: x itself, or `scratch` filled (64-byte aligned). Depends on
  // w only through its format and cols (matmul_many reuses it for weights that share both).
  const void* (*prepare_x)(const WeightMatrix& w, const float* x, int64_t n, void* scratch);
  // y[i * w.rows + r] for i < n, r in [r0, r1); x as prepare_x returned it.
  void (*rows)(const WeightMatrix& w, const void* x, int64_t n, int64_t r0, int64_t r1, float* y);
  // Whether rows() handles this format (else the general variant runs the call).
  bool (*supports)(const WeightMatrix& w);
  // True: only for calls that declare x exactly representable in bf16 (MatmulTask).
  bool bf16_inputs;
  // Rows per unit of work: a multiple of this (0: matmul.cpp's own rule).
  int64_t unit_rows = 0;
  // Chosen only by name (set_matmul_isa), never by default: amx, whose prefill is faster
  // but whose decoding is slower than avx512bf16's, and results differ between the two, so
  // one variant must serve every input count.
  bool opt_in = false;
  // For a bf16_inputs variant: the variant it brings for the calls without the promise on
  // the weights that one supports (amx: BF16 weights, x split into 3 bf16 parts), ahead of
  // the general variant; null: none.
  const MatmulIsa* split_x = nullptr;
};

// Software prefetch of the decode paths (n <= 4): a row group's rows are separate streams,
// each a page or less long (4 KB = one FP8 row of 4096 columns), and the hardware
// prefetchers stop at page boundaries, so each row group would start with cold misses.
// Rows `prefetch_rows_ahead` below the ones being read are fetched instead; since the rows
// are contiguous, every row of the range gets fetched once. About 16 KB ahead: far enough
// for the memory latency at this rate. Measured on the FP8 decode kernel (Zen 5, 2 threads,
// 256 MiB weight): 21.5 -> 35-46 GB/s; 8 to 128 KB ahead were equal within the noise. The
// lines go into L2 (prefetcht1), not L1: on Zen 4 a core's L1 miss buffers capped it at
// about 13 GB/s with prefetcht0 (BF16 head at n = 1: 19.9 -> 30.9 GB/s, FP4 experts 15.4 ->
// 23.1); on Zen 5 the two hints measured alike. 32 and 64 KB ahead: no different on Zen 4.
inline constexpr int64_t kPrefetchAheadBytes = 16 << 10;

// Bytes of one row's data (scales not counted).
inline int64_t row_data_bytes(const WeightMatrix& w) {
  return w.rows == 0 ? 0 : static_cast<int64_t>(w.data_bytes()) / w.rows;
}

// Rows ahead to prefetch, at least `group` (the rows read together).
inline int64_t prefetch_rows_ahead(const WeightMatrix& w, int64_t group) {
  const int64_t row_bytes = std::max<int64_t>(1, row_data_bytes(w));
  return std::max(group, (kPrefetchAheadBytes + row_bytes - 1) / row_bytes);
}

// The tiled paths (n > 4) that decode a tile prefetch, as they decode columns [c0, c1) of a
// tile's row, the same columns of `row` (that row one tile further; nothing past the
// matrix) into L2: a tile pass is too long for L1 to keep them. (Weights read in place are
// prefetched line by line inside the register tile's loop, matmul_driver.h.)
inline void prefetch_tile_block(const WeightMatrix& w, int64_t row, int64_t c0, int64_t c1) {
  if (row >= w.rows) return;
  const int64_t row_bytes = row_data_bytes(w);
  const char* base = reinterpret_cast<const char*>(w.data) + row * row_bytes;
  for (int64_t b = c0 * row_bytes / w.cols; b < c1 * row_bytes / w.cols; b += 64)
    __builtin_prefetch(base + b, 0, 2);
}

// Null when this build or this CPU lacks the instructions.
const MatmulIsa* matmul_isa_amx();
const MatmulIsa* matmul_isa_avx512_bf16();
const MatmulIsa* matmul_isa_avx512();
const MatmulIsa* matmul_isa_avx2();
const MatmulIsa& matmul_isa_scalar();

}  // namespace flint::kernels::detail
