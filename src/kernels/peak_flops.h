// This machine's peak multiply-add rate, measured with the kernel thread pool: the roofline
// of prefill (large batches are bound by arithmetic, not memory), so `flint bench` reports
// prefill FLOP/s as a share of it, honestly on any machine and thread count.
#pragma once

namespace flint::kernels {

struct PeakFlops {
  double f32_fma = 0;   // float32 fused multiply-add, the widest vectors the CPU has (FLOP/s)
  double bf16_dot = 0;  // AVX-512 BF16 dot products (vdpbf16ps), 0 where absent (FLOP/s)
};

// Runs independent multiply-add chains on every thread of thread_pool() for about
// `seconds` per kind; 2 FLOP per multiply-add. Best of 3.
PeakFlops measure_peak_flops(double seconds = 0.05);

}  // namespace flint::kernels
