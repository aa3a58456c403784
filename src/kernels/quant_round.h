// Simulated low-precision rounding of activations ("fake quantisation"): each block of
// `block` consecutive values gets a power-of-two scale s = 2^ceil(log2(amax / max_code)),
// values become round(x / s) in the target format (clamped to its range) times s.
// This is what DeepSeek's act_quant / fp4_act_quant kernels do with inplace=True and
// ue8m0 scales; amax is floored (1e-4 for FP8, 6 * 2^-126 for FP4) as there.
#pragma once

#include <cstdint>

namespace flint::kernels {

// FP8 E4M3 (max 448). n must be a multiple of block.
void round_fp8_blocks(float* x, int64_t n, int64_t block);
// FP4 E2M1 (max 6). n must be a multiple of block.
void round_fp4_blocks(float* x, int64_t n, int64_t block);

// fp8_e4m3_to_float(float_to_fp8_e4m3(q)) for |q| <= 448 or NaN, without branches (the
// inner loop of round_fp8_blocks; exposed for its test).
float round_to_e4m3(float q);
// fp4_e2m1_to_float(float_to_fp4_e2m1(q)) for |q| <= 6 or NaN (NaN gives +0, as the codec),
// without branches (the inner loop of round_fp4_blocks; exposed for its test).
float round_to_e2m1(float q);

// The power-of-two scale for a block with absolute maximum amax (>= the floor).
float pow2_scale(float amax, float max_code);

}  // namespace flint::kernels
