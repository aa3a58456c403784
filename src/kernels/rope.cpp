#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

namespace flint::kernels {

std::vector<float> rope_inv_freq(int64_t dim, double base) {
  std::vector<float> f(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    // Reference: 1 / base ** (arange(0, dim, 2, float32) / dim), in float32.
    float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    float p = std::pow(static_cast<float>(base), exponent);
    f[static_cast<size_t>(i)] = 1.0f / p;
  }
  return f;
}

std::vector<float> yarn_inv_freq(int64_t dim, double base, double factor, int64_t original_len,
                                 double beta_fast, double beta_slow) {
  std::vector<float> f = rope_inv_freq(dim, base);
  if (original_len <= 0) return f;
  auto correction_dim = [&](double rotations) {
    return static_cast<double>(dim) *
           std::log(static_cast<double>(original_len) / (rotations * 2 * M_PI)) /
           (2 * std::log(base));
  };
  double low = std::max(std::floor(correction_dim(beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < dim / 2; ++i) {
    float ramp = static_cast<float>((static_cast<double>(i) - low) / (high - low));
    ramp = std::clamp(ramp, 0.0f, 1.0f);
    float smooth = 1.0f - ramp;
    float freq = f[static_cast<size_t>(i)];
    f[static_cast<size_t>(i)] = freq / static_cast<float>(factor) * (1.0f - smooth) + freq * smooth;
  }
  return f;
}

void rope_cos_sin(const std::vector<float>& inv_freq, int64_t position, float* cos_out,
                  float* sin_out) {
  float pos = static_cast<float>(position);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    float angle = pos * inv_freq[i];
    cos_out[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
    sin_out[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
}

void apply_rope(float* x, const float* cos, const float* sin, int64_t half, bool inverse) {
  for (int64_t i = 0; i < half; ++i) {
    float c = cos[i];
    float s = inverse ? -sin[i] : sin[i];
    float a = x[2 * i];
    float b = x[2 * i + 1];
    x[2 * i] = a * c - b * s;
    x[2 * i + 1] = a * s + b * c;
  }
}

}  // namespace flint::kernels
