// libFuzzer target: the safetensors header parser on arbitrary bytes (a whole file image).
// The only acceptable failure is flint::Error; any other exception, crash, sanitizer report
// or hang is a bug.
#include <cstddef>
#include <cstdint>
#include <span>

#include "base/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  try {
    flint::SafetensorsHeader header = flint::parse_safetensors_header(file, "fuzz");
    // Whatever was accepted must describe bytes inside the input.
    for (const flint::TensorInfo& t : header.tensors) {
      if (t.begin > t.end || header.data_start + t.end > size) __builtin_trap();
      if (t.numel() * flint::dtype_size(t.dtype) != t.nbytes()) __builtin_trap();
    }
  } catch (const flint::Error&) {
  }
  return 0;
}
