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
#pragma once

#include <cstdint>

#include "formats/weight.h"

namespace flint::kernels::detail {

struct MatmulIsa {
  const char* name;
  // Floats of scratch prepare_x needs (0: it never copies x).
  int64_t (*scratch_floats)(const WeightMatrix& w, int64_t n);
  // x in the column order rows() reads: x itself, or `scratch` filled.
  const float* (*prepare_x)(const WeightMatrix& w, const float* x, int64_t n, float* scratch);
  // y[i * w.rows + r] for i < n, r in [r0, r1); x as prepare_x returned it.
  void (*rows)(const WeightMatrix& w, const float* x, int64_t n, int64_t r0, int64_t r1, float* y);
};

// Null when this build or this CPU lacks the instructions.
const MatmulIsa* matmul_isa_avx512();
const MatmulIsa* matmul_isa_avx2();
const MatmulIsa& matmul_isa_scalar();

}  // namespace flint::kernels::detail
