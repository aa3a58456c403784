#include "kernels/kv_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "formats/bf16.h"
#include "formats/fp8.h"
#include "kernels/quant_round.h"

namespace flint::kernels {

namespace {
constexpr int64_t kFp8Block = 64;
constexpr float kFp8Max = 448.0f;
constexpr float kAmaxFloor = 1e-4f;  // as round_fp8_blocks (DeepSeek's act_quant)

int64_t nope_dim(const KvRowFormat& f) { return f.dim - f.rope_dim; }

// fp8_e4m3_to_float(in[i]) * s for n codes (s a power of two). That function selects with
// masks, so this loop vectorises: attention reads its whole window through decode_kv_rows
// every step (128 rows of 512 values per layer), where a table lookup cost about 2 cycles
// a value.
void e4m3_values(const uint8_t* __restrict in, int64_t n, float s, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp8_e4m3_to_float(in[i]) * s;
}

// Stored bf16 values (little-endian, not 2-byte aligned in an fp8 row) widened to float32.
void bf16_values(const uint8_t* __restrict in, int64_t n, float* __restrict out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16_to_float(static_cast<uint16_t>(in[2 * i] | in[2 * i + 1] << 8));
}
}  // namespace

int64_t KvRowFormat::bytes() const {
  switch (dtype) {
    case KvDtype::kF32:
      return 4 * dim;
    case KvDtype::kBf16:
      return 2 * dim;
    case KvDtype::kFp8:
      return (dim - rope_dim) + (dim - rope_dim) / kFp8Block + 2 * rope_dim;
  }
  return 0;
}

const char* kv_dtype_name(KvDtype d) {
  switch (d) {
    case KvDtype::kF32:
      return "float32";
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kFp8:
      return "fp8";
  }
  return "?";
}

void encode_kv_rows(const KvRowFormat& f, const float* rows, int64_t count, uint8_t* out) {
  const int64_t row_bytes = f.bytes();
  for (int64_t r = 0; r < count; ++r, rows += f.dim, out += row_bytes) {
    switch (f.dtype) {
      case KvDtype::kF32:
        std::memcpy(out, rows, static_cast<size_t>(row_bytes));
        break;
      case KvDtype::kBf16:
        for (int64_t i = 0; i < f.dim; ++i) {
          uint16_t b = float_to_bf16(rows[i]);
          std::memcpy(out + 2 * i, &b, 2);
        }
        break;
      case KvDtype::kFp8: {
        const int64_t nope = nope_dim(f);
        FLINT_CHECK(nope % kFp8Block == 0, "nope dims {} are not blocks of 64", nope);
        uint8_t* codes = out;
        uint8_t* scales = out + nope;
        uint8_t* rope = scales + nope / kFp8Block;
        for (int64_t b = 0; b < nope; b += kFp8Block) {
          float amax = 0.0f;
          for (int64_t i = b; i < b + kFp8Block; ++i) amax = std::max(amax, std::fabs(rows[i]));
          const float s = pow2_scale(std::max(amax, kAmaxFloor), kFp8Max);
          // s is 2^k: its E8M0 code is the biased exponent of the float.
          scales[b / kFp8Block] = static_cast<uint8_t>((std::bit_cast<uint32_t>(s) >> 23) & 0xFF);
          for (int64_t i = b; i < b + kFp8Block; ++i)
            codes[i] = float_to_fp8_e4m3(std::clamp(rows[i] / s, -kFp8Max, kFp8Max));
        }
        for (int64_t i = 0; i < f.rope_dim; ++i) {
          uint16_t v = float_to_bf16(rows[nope + i]);
          std::memcpy(rope + 2 * i, &v, 2);
        }
        break;
      }
    }
  }
}

void decode_kv_rows(const KvRowFormat& f, const uint8_t* in, int64_t count, float* out) {
  const int64_t row_bytes = f.bytes();
  for (int64_t r = 0; r < count; ++r, in += row_bytes, out += f.dim) {
    switch (f.dtype) {
      case KvDtype::kF32:
        std::memcpy(out, in, static_cast<size_t>(row_bytes));
        break;
      case KvDtype::kBf16:
        bf16_values(in, f.dim, out);
        break;
      case KvDtype::kFp8: {
        const int64_t nope = nope_dim(f);
        const uint8_t* scales = in + nope;
        const uint8_t* rope = scales + nope / kFp8Block;
        for (int64_t b = 0; b < nope; b += kFp8Block) {
          const float s = std::bit_cast<float>(static_cast<uint32_t>(scales[b / kFp8Block]) << 23);
          e4m3_values(in + b, kFp8Block, s, out + b);
        }
        bf16_values(rope, f.rope_dim, out + nope);
        break;
      }
    }
  }
}

void round_kv_rows(const KvRowFormat& f, float* rows, int64_t count) {
  if (f.dtype == KvDtype::kF32) return;
  std::vector<uint8_t> buf(static_cast<size_t>(f.bytes()));
  for (int64_t r = 0; r < count; ++r) {
    encode_kv_rows(f, rows + r * f.dim, 1, buf.data());
    decode_kv_rows(f, buf.data(), 1, rows + r * f.dim);
  }
}

}  // namespace flint::kernels
