// Dequantisation of stored weight rows to float32: the reference path for every weight
// format of the DeepSeek-V4 checkpoints (the fast matmul kernels may work on the codes
// directly; they are tested against these).
//
// Every function takes the full matrix shape [rows, cols] and writes rows
// [row_begin, row_end) of it to `out`, row-major: (row_end - row_begin) * cols floats.
// The caller owns all buffers. Cost: one table lookup and one multiply per element.
// Shapes are the loader's responsibility (validated against the tensor shapes there);
// a bad range here is a bug and fails a FLINT_CHECK.
#pragma once

#include <cstdint>

namespace flint {

inline constexpr int64_t kFp8BlockSize = 128;   // FP8 weights: one scale per 128x128 block
inline constexpr int64_t kMxfp4BlockSize = 32;  // MXFP4 weights: one scale per 32 inputs

// FP8 E4M3 weight [rows, cols] with E8M0 block scales [ceil(rows/128), ceil(cols/128)]:
// value(r, c) = fp8(weight[r][c]) * 2^(scale[r/128][c/128] - 127).
void dequant_fp8_block128(const uint8_t* weight, const uint8_t* scale_e8m0, int64_t rows,
                          int64_t cols, int64_t row_begin, int64_t row_end, float* out);

// The same layout with float32 block scales (the FP8 experts of the -Base checkpoint):
// value(r, c) = fp8(weight[r][c]) * scale[r/128][c/128].
void dequant_fp8_block128(const uint8_t* weight, const float* scale_f32, int64_t rows, int64_t cols,
                          int64_t row_begin, int64_t row_end, float* out);

// MXFP4 weight: `packed` is [rows, cols/2] bytes, the low nibble holding the even column;
// scales are E8M0 [rows, ceil(cols/32)]:
// value(r, c) = fp4(nibble(r, c)) * 2^(scale[r][c/32] - 127). `cols` must be even.
void dequant_mxfp4(const uint8_t* packed, const uint8_t* scale_e8m0, int64_t rows, int64_t cols,
                   int64_t row_begin, int64_t row_end, float* out);

// BF16 weight [rows, cols] (bit patterns): value(r, c) = bf16(weight[r][c]).
void dequant_bf16(const uint16_t* weight, int64_t rows, int64_t cols, int64_t row_begin,
                  int64_t row_end, float* out);

}  // namespace flint
