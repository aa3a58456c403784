// SwiGLU with DeepSeek-V4's clamps: out = silu(min(gate, limit)) * clamp(up, -limit, limit).
// limit <= 0 disables the clamps.
#pragma once

#include <cstdint>

namespace flint::kernels {

float silu(float x);
void swiglu(const float* gate, const float* up, int64_t n, float limit, float* out);

}  // namespace flint::kernels
