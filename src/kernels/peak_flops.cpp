#include "kernels/peak_flops.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "base/thread_pool.h"

namespace flint::kernels {
namespace {

// 12 independent accumulators hide the FMA latency (4 cycles) on two pipes. Returns FLOPs
// done in `iters` rounds; the sum keeps the work observable.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) double fma_avx512(int64_t iters, float* sink) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  for (float v : out) *sink += v;
  return static_cast<double>(iters) * 12 * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters, float* sink) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  alignas(32) float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_store_ps(out, s);
  for (float v : out) *sink += v;
  return static_cast<double>(iters) * 12 * 8 * 2;
}

// vdpbf16ps: 16 lanes, each adding two bf16 products: 64 FLOP per instruction.
__attribute__((target("avx512f,avx512bf16"))) double bf16_avx512(int64_t iters, float* sink) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t k = 0; k < iters; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  for (float v : out) *sink += v;
  return static_cast<double>(iters) * 12 * 16 * 4;
}
#endif

// FLOP/s of `kernel` run on every pool thread at once, best of 3.
double rate(double (*kernel)(int64_t, float*), double seconds) {
  ThreadPool& pool = thread_pool();
  const size_t threads = pool.size();
  // Calibrate the rounds for the time on one thread.
  float sink = 0;
  int64_t iters = 1 << 14;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    kernel(iters, &sink);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > seconds / 4 || iters > (int64_t{1} << 40)) {
      iters = static_cast<int64_t>(static_cast<double>(iters) * seconds / std::max(dt, 1e-9));
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<double> flops{0};
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(threads, 1, [&](size_t b, size_t e) {
      float local = 0;
      double f = 0;
      for (size_t i = b; i < e; ++i) f += kernel(iters, &local);
      double cur = flops.load();
      while (!flops.compare_exchange_weak(cur, cur + f)) {
      }
      if (local == 12345.f) std::abort();  // keeps the result alive; never true
    });
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops.load() / dt);
  }
  return best;
}

}  // namespace

PeakFlops measure_peak_flops(double seconds) {
  PeakFlops p;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    p.f32_fma = rate(&fma_avx512, seconds);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.f32_fma = rate(&fma_avx2, seconds);
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    p.bf16_dot = rate(&bf16_avx512, seconds);
#endif
  return p;
}

}  // namespace flint::kernels
