// y = x . W^T for a weight in any storage format (formats/weight.h), read in place.
//
// Shapes: x [n, w.cols] row-major, y [n, w.rows] row-major. Work is split over the thread
// pool by blocks of weight rows. The weight is decoded to float32 exactly (FP8 and FP4
// codes times their power-of-two or float32 scales) in SIMD registers and multiplied in
// float32 with fused multiply-adds; each weight is read from memory once per call whatever
// n is (decode: in registers against all n <= 4 inputs; prefill: 16 x 512 tiles decoded to
// an L1 buffer, or for float32 and BF16 read in place, and reused by every input).
//
// Results are deterministic: they depend neither on the thread count nor on n (a row of x
// gives the same bits alone or in a batch). Variants (matmul_isa.h): avx512, avx2, and the
// scalar reference; the best one the CPU has is used unless set_matmul_isa picks another.
//
// x_bf16_exact: the caller promises every element of x is exactly a bfloat16 value (e.g.
// FP8 values times power-of-two scales, as kernels::round_fp8_blocks makes). CPUs with
// AVX-512 BF16 and VBMI then run the avx512bf16 variant for BF16, FP8 and FP4 weights:
// weights decoded to bf16 with byte permutes and multiplied with vdpbf16ps (exact products,
// float32 sums in another fixed order, so other bits than the float32 path; still
// independent of n and threads). bf16 subnormals in x or the weight and partial sums below
// 2^-126 count as zero there. Without the promise, or on other CPUs, nothing changes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "formats/weight.h"

namespace flint::kernels {

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, bool x_bf16_exact = false);

// Several independent products in one parallel region: the experts of a MoE layer are many
// small weights whose separate calls would each pay a thread wake-up and leave threads idle
// at the end of every small product.
struct MatmulTask {
  const WeightMatrix* w = nullptr;
  const float* x = nullptr;  // [n, w->cols]
  int64_t n = 0;
  float* y = nullptr;         // [n, w->rows]
  bool x_bf16_exact = false;  // see matmul()
};
void matmul_many(std::span<const MatmulTask> tasks);

// The variants this build and CPU can run, best first ("avx512bf16", "amx", "avx512",
// "avx2", "scalar"). The default is the first but amx, which only set_matmul_isa picks: it
// multiplies bf16-exact inputs on Intel's AMX tiles (prefill faster, decoding slower than
// avx512bf16 on a Sapphire Rapids-class Xeon; matmul_amx.cpp).
std::vector<std::string_view> matmul_isas();
// Picks a variant by name ("" = the default); false if unavailable. avx512bf16 runs only the
// calls that declare x bf16-exact, the best other variant runs the rest; any other name
// runs every call. Not thread-safe with running matmuls: for tests, benchmarks, start-up.
bool set_matmul_isa(std::string_view name);
std::string_view matmul_isa();

}  // namespace flint::kernels
