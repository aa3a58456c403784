#include "formats/block_dequant.h"

#include "base/check.h"
#include "formats/bf16.h"
#include "formats/e8m0.h"
#include "formats/fp4.h"
#include "formats/fp8.h"

namespace flint {

namespace {

void check_range(int64_t rows, int64_t cols, int64_t row_begin, int64_t row_end) {
  FLINT_CHECK(rows >= 0 && cols >= 0, "shape [{}, {}]", rows, cols);
  FLINT_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= rows, "rows [{}, {}) of {}",
              row_begin, row_end, rows);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One row segment of up to 128 FP8 codes sharing a scale. Kept tiny so the compiler can
// turn it into gathers and multiplies.
inline void fp8_segment(const float* table, const uint8_t* codes, int64_t n, float scale,
                        float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = table[codes[i]] * scale;
}

template <typename ScaleToFloat, typename Scale>
void dequant_fp8_rows(const uint8_t* weight, const Scale* scale, int64_t rows, int64_t cols,
                      int64_t row_begin, int64_t row_end, float* out, ScaleToFloat to_float) {
  check_range(rows, cols, row_begin, row_end);
  const float* table = fp8_e4m3_table();
  const int64_t scale_cols = ceil_div(cols, kFp8BlockSize);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = weight + r * cols;
    const Scale* row_scales = scale + (r / kFp8BlockSize) * scale_cols;
    float* dst = out + (r - row_begin) * cols;
    for (int64_t b = 0; b < scale_cols; ++b) {
      const int64_t c0 = b * kFp8BlockSize;
      const int64_t n = cols - c0 < kFp8BlockSize ? cols - c0 : kFp8BlockSize;
      fp8_segment(table, row + c0, n, to_float(row_scales[b]), dst + c0);
    }
  }
}

}  // namespace

void dequant_fp8_block128(const uint8_t* weight, const uint8_t* scale_e8m0, int64_t rows,
                          int64_t cols, int64_t row_begin, int64_t row_end, float* out) {
  dequant_fp8_rows(weight, scale_e8m0, rows, cols, row_begin, row_end, out,
                   [](uint8_t e) { return e8m0_to_float(e); });
}

void dequant_fp8_block128(const uint8_t* weight, const float* scale_f32, int64_t rows, int64_t cols,
                          int64_t row_begin, int64_t row_end, float* out) {
  dequant_fp8_rows(weight, scale_f32, rows, cols, row_begin, row_end, out,
                   [](float s) { return s; });
}

void dequant_mxfp4(const uint8_t* packed, const uint8_t* scale_e8m0, int64_t rows, int64_t cols,
                   int64_t row_begin, int64_t row_end, float* out) {
  check_range(rows, cols, row_begin, row_end);
  FLINT_CHECK(cols % 2 == 0, "MXFP4 needs an even number of columns, got {}", cols);
  const float* table = fp4_e2m1_table();
  const int64_t packed_cols = cols / 2;
  const int64_t scale_cols = ceil_div(cols, kMxfp4BlockSize);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = packed + r * packed_cols;
    const uint8_t* row_scales = scale_e8m0 + r * scale_cols;
    float* dst = out + (r - row_begin) * cols;
    for (int64_t b = 0; b < scale_cols; ++b) {
      const float s = e8m0_to_float(row_scales[b]);
      const int64_t p0 = b * (kMxfp4BlockSize / 2);
      const int64_t p1 =
          p0 + kMxfp4BlockSize / 2 < packed_cols ? p0 + kMxfp4BlockSize / 2 : packed_cols;
      for (int64_t p = p0; p < p1; ++p) {
        const uint8_t byte = row[p];
        dst[2 * p] = table[byte & 0xF] * s;
        dst[2 * p + 1] = table[byte >> 4] * s;
      }
    }
  }
}

void dequant_bf16(const uint16_t* weight, int64_t rows, int64_t cols, int64_t row_begin,
                  int64_t row_end, float* out) {
  check_range(rows, cols, row_begin, row_end);
  bf16_to_float_n(weight + row_begin * cols, static_cast<std::size_t>((row_end - row_begin) * cols),
                  out);
}

}  // namespace flint
