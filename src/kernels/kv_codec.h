// How attention KV rows are stored: float32, bfloat16, or FP8. The FP8 format is the one
// DeepSeek's inference code rounds its KV to: the leading `dim - rope_dim` ("nope") values
// as E4M3 in blocks of 64, each block with a power-of-two scale (one E8M0 byte), and the
// trailing `rope_dim` values as bfloat16.
//
// round_kv_rows(x) == decode(encode(x)) bit for bit, so a model that rounds its rows with
// it before using them computes the same thing whether a row comes from the chunk being
// computed or from storage. The FP8 rounding of the nope part is the same function as
// round_fp8_blocks(.., 64), so rows already rounded that way (DeepSeek's own simulation)
// are stored losslessly. Cost: O(count * dim), no allocation.
#pragma once

#include <cstdint>

namespace flint::kernels {

enum class KvDtype { kF32, kBf16, kFp8 };

struct KvRowFormat {
  KvDtype dtype = KvDtype::kF32;
  int64_t dim = 0;       // values per row
  int64_t rope_dim = 0;  // kFp8: trailing values kept in bf16; (dim - rope_dim) % 64 == 0

  int64_t bytes() const;  // bytes of one stored row
};

void encode_kv_rows(const KvRowFormat& f, const float* rows, int64_t count, uint8_t* out);
void decode_kv_rows(const KvRowFormat& f, const uint8_t* in, int64_t count, float* out);
void round_kv_rows(const KvRowFormat& f, float* rows, int64_t count);

const char* kv_dtype_name(KvDtype d);

}  // namespace flint::kernels
