#include "formats/weight.h"

#include <cstring>

#include "base/check.h"
#include "formats/bf16.h"
#include "formats/block_dequant.h"
#include "formats/e8m0.h"

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

uint64_t WeightMatrix::data_bytes() const {
  const uint64_t n = static_cast<uint64_t>(rows * cols);
  switch (format) {
    case WeightFormat::kF32:
      return n * 4;
    case WeightFormat::kBF16:
      return n * 2;
    case WeightFormat::kFp8Block128:
      return n;
    case WeightFormat::kFp4Mx32:
      return n / 2;
  }
  return 0;
}

uint64_t WeightMatrix::scale_bytes() const {
  switch (format) {
    case WeightFormat::kFp8Block128:
      return static_cast<uint64_t>(ceil_div(rows, 128) * ceil_div(cols, 128)) *
             dtype_size(scale_dtype);
    case WeightFormat::kFp4Mx32:
      return static_cast<uint64_t>(rows * (cols / 32));
    default:
      return 0;
  }
}

uint64_t WeightMatrix::nbytes() const { return data_bytes() + scale_bytes(); }

void WeightMatrix::mark_regular_scales() {
  regular_scales = scale == nullptr || scale_dtype != DType::F8_E8M0 ||
                   e8m0_codes_regular(reinterpret_cast<const uint8_t*>(scale), scale_bytes());
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

bool WeightMatrix::can_cut_rows_at(int64_t row) const {
  if (row < 0 || row > rows) return false;
  return format != WeightFormat::kFp8Block128 || row % 128 == 0 || row == rows;
}

bool WeightMatrix::can_cut_columns_at(int64_t col) const {
  if (col < 0 || col > cols) return false;
  switch (format) {
    case WeightFormat::kFp8Block128:
      return col % 128 == 0 || col == cols;
    case WeightFormat::kFp4Mx32:
      return col % 32 == 0;
    default:
      return true;
  }
}

WeightMatrix WeightMatrix::copy_columns(int64_t col_begin, int64_t col_end,
                                        std::vector<std::byte>& storage) const {
  FLINT_CHECK(col_begin <= col_end && can_cut_columns_at(col_begin) && can_cut_columns_at(col_end),
              "columns [{}, {}) of a {} matrix with {} columns", col_begin, col_end,
              weight_format_name(format), cols);
  const int64_t n = col_end - col_begin;
  // Bytes per row of data and of scales, and where the kept part starts in each.
  int64_t row_bytes = 0, first = 0, keep = 0, scale_rows = 0, scale_row_bytes = 0,
          scale_first = 0, scale_keep = 0;
  const int64_t ssize = static_cast<int64_t>(dtype_size(scale_dtype));
  switch (format) {
    case WeightFormat::kF32:
    case WeightFormat::kBF16: {
      const int64_t e = format == WeightFormat::kF32 ? 4 : 2;
      row_bytes = cols * e, first = col_begin * e, keep = n * e;
      break;
    }
    case WeightFormat::kFp8Block128:
      row_bytes = cols, first = col_begin, keep = n;
      scale_rows = ceil_div(rows, 128), scale_row_bytes = ceil_div(cols, 128) * ssize;
      scale_first = col_begin / 128 * ssize, scale_keep = ceil_div(n, 128) * ssize;
      break;
    case WeightFormat::kFp4Mx32:
      row_bytes = cols / 2, first = col_begin / 2, keep = n / 2;
      scale_rows = rows, scale_row_bytes = cols / 32, scale_first = col_begin / 32,
      scale_keep = n / 32;
      break;
  }
  storage.resize(static_cast<size_t>(rows * keep + scale_rows * scale_keep));
  std::byte* out = storage.data();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * keep, data + r * row_bytes + first, static_cast<size_t>(keep));
  WeightMatrix w = *this;
  w.cols = n;
  w.data = out;
  if (scale_rows > 0) {
    std::byte* s = out + rows * keep;
    for (int64_t r = 0; r < scale_rows; ++r)
      std::memcpy(s + r * scale_keep, scale + r * scale_row_bytes + scale_first,
                  static_cast<size_t>(scale_keep));
    w.scale = s;
  }
  return w;
}

}  // namespace flint
