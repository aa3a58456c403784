// WeightMatrix: a 2-D weight [rows, cols] (stored [out, in], as checkpoints do) in one of
// the formats DeepSeek-V4 checkpoints use, viewed in place (usually inside an mmap).
//
// This is the format interface: model code holds WeightMatrix objects and hands them to
// kernels (kernels/matmul.h), which pick the arithmetic for the format. Model code never
// branches on FP8 vs FP4.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace flint {

enum class WeightFormat : uint8_t {
  kF32,          // float32 [rows, cols]
  kBF16,         // bfloat16 [rows, cols]
  kFp8Block128,  // E4M3 [rows, cols] + one scale per 128x128 block:
                 //   [ceil(rows/128), ceil(cols/128)], E8M0 or float32 (the -Base experts)
  kFp4Mx32,      // E2M1 packed two per byte [rows, cols/2] (low nibble = even column)
                 //   + one E8M0 scale per 32 columns: [rows, cols/32]
};

std::string_view weight_format_name(WeightFormat format);

struct WeightMatrix {
  WeightFormat format = WeightFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const std::byte* data = nullptr;   // not owned
  const std::byte* scale = nullptr;  // not owned; null for kF32 / kBF16
  DType scale_dtype = DType::F8_E8M0;
  // True when every E8M0 scale code is known to be neither 0 (a subnormal scale) nor 255
  // (NaN), the codes whose float is not code << 23 (e8m0_codes_regular), so kernels skip
  // scanning the codes of every row range they read; false means unknown (the kernels
  // check). Set once: by the model from the loader's scale check (LoadedParam), or by
  // mark_regular_scales(). Views (row_slice, copy_columns) keep it: their codes are a subset.
  bool regular_scales = false;

  bool empty() const { return data == nullptr; }
  // Bytes of data plus scales (what a matmul streams from memory).
  uint64_t nbytes() const;
  uint64_t data_bytes() const;
  uint64_t scale_bytes() const;
  // Scans the scale codes (one pass over scale_bytes()) and sets regular_scales; float32
  // scales and unscaled formats count as regular.
  void mark_regular_scales();
  // Writes rows [row_begin, row_end) as float32 to `out` ((row_end - row_begin) * cols).
  void dequantize_rows(int64_t row_begin, int64_t row_end, float* out) const;
  // A view of rows [row_begin, row_end): row_begin must be a multiple of 128 for kFp8Block128.
  WeightMatrix row_slice(int64_t row_begin, int64_t row_end) const;
  // Whether row_slice / copy_columns can cut at `row` / `col` (the format's block grid).
  bool can_cut_rows_at(int64_t row) const;
  bool can_cut_columns_at(int64_t col) const;
  // Columns [col_begin, col_end) copied into `storage` (resized; the result views it): a
  // row-major matrix has no column view. Both ends must be cuttable.
  WeightMatrix copy_columns(int64_t col_begin, int64_t col_end,
                            std::vector<std::byte>& storage) const;
};

}  // namespace flint
