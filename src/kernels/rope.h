// Rotary position embeddings, GPT-J style: consecutive pairs (x[2i], x[2i+1]) rotate by
// angle position * inv_freq[i].
#pragma once

#include <cstdint>
#include <vector>

namespace flint::kernels {

// Plain RoPE frequencies: inv_freq[i] = base^(-2i/dim), i < dim/2.
std::vector<float> rope_inv_freq(int64_t dim, double base);

// YaRN frequencies (as DeepSeek's precompute_freqs_cis): interpolate between freq/factor
// and freq with a linear ramp over the dims whose wavelength falls between beta_fast and
// beta_slow rotations of original_len. No attention-scale factor.
std::vector<float> yarn_inv_freq(int64_t dim, double base, double factor, int64_t original_len,
                                 double beta_fast, double beta_slow);

// cos/sin of position * inv_freq, computed as the reference does: the angle is the float32
// product, cos and sin are then rounded to float32.
void rope_cos_sin(const std::vector<float>& inv_freq, int64_t position, float* cos_out,
                  float* sin_out);

// Rotates x[0 .. 2 * half) in place by the given cos/sin (inverse: by the negative angle).
void apply_rope(float* x, const float* cos, const float* sin, int64_t half, bool inverse);

}  // namespace flint::kernels
