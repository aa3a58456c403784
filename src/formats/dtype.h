// Element types of checkpoint tensors, named as in the safetensors format.
//
// FP4 E2M1 weights have no safetensors dtype of their own: DeepSeek stores them as I8
// [out, in/2] (two values per byte). The parameter registry says which I8 tensors are
// packed FP4; the dtype here stays I8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace flint {

enum class DType : uint8_t {
  F64,
  F32,
  F16,
  BF16,
  F8_E4M3,
  F8_E5M2,
  F8_E8M0,
  I64,
  I32,
  I16,
  I8,
  U8,
  BOOL,
};

// Bytes per element (F8_* and I8/U8/BOOL: 1).
std::size_t dtype_size(DType dtype);
// The safetensors name: "F32", "BF16", "F8_E4M3", "F8_E8M0", "I8", ...
std::string_view dtype_name(DType dtype);
// Inverse of dtype_name; nullopt for names flint does not know.
std::optional<DType> parse_dtype(std::string_view name);

}  // namespace flint
