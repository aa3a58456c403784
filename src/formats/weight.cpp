#include "formats/weight.h"

#include <cstring>

#include "base/check.h"
#include "formats/bf16.h"
#include "formats/block_dequant.h"

namespace flint {

std::string_view weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kFp8Block128:
      return "fp8-block128";
    case WeightFormat::kFp4Mx32:
      return "fp4-mx32";
  }
  return "?";
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

uint64_t WeightMatrix::nbytes() const {
  uint64_t n = static_cast<uint64_t>(rows * cols);
  switch (format) {
    case WeightFormat::kF32:
      return n * 4;
    case WeightFormat::kBF16:
      return n * 2;
    case WeightFormat::kFp8Block128:
      return n + static_cast<uint64_t>(ceil_div(rows, 128) * ceil_div(cols, 128)) *
                     dtype_size(scale_dtype);
    case WeightFormat::kFp4Mx32:
      return n / 2 + static_cast<uint64_t>(rows * (cols / 32));
  }
  return 0;
}

void WeightMatrix::dequantize_rows(int64_t row_begin, int64_t row_end, float* out) const {
  FLINT_CHECK(row_begin >= 0 && row_begin <= row_end && row_end <= rows);
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);
  switch (format) {
    case WeightFormat::kF32:
      std::memcpy(out, data + row_begin * cols * 4,
                  static_cast<size_t>((row_end - row_begin) * cols) * 4);
      return;
    case WeightFormat::kBF16: {
      const auto* src = reinterpret_cast<const uint16_t*>(data) + row_begin * cols;
      for (int64_t i = 0, n = (row_end - row_begin) * cols; i < n; ++i)
        out[i] = bf16_to_float(src[i]);
      return;
    }
    case WeightFormat::kFp8Block128:
      if (scale_dtype == DType::F32) {
        dequant_fp8_block128(bytes, reinterpret_cast<const float*>(scale), rows, cols, row_begin,
                             row_end, out);
      } else {
        dequant_fp8_block128(bytes, reinterpret_cast<const uint8_t*>(scale), rows, cols, row_begin,
                             row_end, out);
      }
      return;
    case WeightFormat::kFp4Mx32:
      dequant_mxfp4(bytes, reinterpret_cast<const uint8_t*>(scale), rows, cols, row_begin, row_end,
                    out);
      return;
  }
}

WeightMatrix WeightMatrix::row_slice(int64_t row_begin, int64_t row_end) const {
  FLINT_CHECK(row_begin >= 0 && row_begin <= row_end && row_end <= rows);
  WeightMatrix w = *this;
  w.rows = row_end - row_begin;
  switch (format) {
    case WeightFormat::kF32:
      w.data = data + row_begin * cols * 4;
      break;
    case WeightFormat::kBF16:
      w.data = data + row_begin * cols * 2;
      break;
    case WeightFormat::kFp8Block128:
      FLINT_CHECK(row_begin % 128 == 0, "FP8 row slices must start on a 128-row block");
      w.data = data + row_begin * cols;
      w.scale = scale + (row_begin / 128) * ceil_div(cols, 128) *
                            static_cast<int64_t>(dtype_size(scale_dtype));
      break;
    case WeightFormat::kFp4Mx32:
      w.data = data + row_begin * cols / 2;
      w.scale = scale + row_begin * (cols / 32);
      break;
  }
  return w;
}

}  // namespace flint
