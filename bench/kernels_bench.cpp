// Kernel micro-benchmarks: matmul in each weight format at decode (n = 1) and small-batch
// (n = 4, 16) shapes, against the memory read rate this machine reaches. The bytes/s
// counter is the weight's bytes (data plus scales) per call: decode streams every weight
// once, so a kernel that reads at the memory rate is at the roofline.
//   build/bench/flint_kernels_bench [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/memory_bandwidth.h"
#include "base/rng.h"
#include "formats/bf16.h"
#include "formats/fp8.h"
#include "kernels/matmul.h"

namespace flint {
namespace {

// A random weight [rows, cols] in `format`, owning its bytes (values as the checkpoints
// hold them: normal values, E8M0 scales near 1).
struct OwnedWeight {
  std::vector<uint8_t> data, scale;
  WeightMatrix w;
};

OwnedWeight make_weight(WeightFormat format, int64_t rows, int64_t cols) {
  Rng rng(7);
  OwnedWeight o;
  o.w.format = format;
  o.w.rows = rows;
  o.w.cols = cols;
  const auto n = static_cast<size_t>(rows * cols);
  switch (format) {
    case WeightFormat::kF32:
      o.data.resize(n * 4);
      for (size_t i = 0; i < n; ++i)
        reinterpret_cast<float*>(o.data.data())[i] = static_cast<float>(rng.normal());
      break;
    case WeightFormat::kBF16:
      o.data.resize(n * 2);
      for (size_t i = 0; i < n; ++i)
        reinterpret_cast<uint16_t*>(o.data.data())[i] =
            float_to_bf16(static_cast<float>(rng.normal()));
      break;
    case WeightFormat::kFp8Block128:
      o.data.resize(n);
      for (auto& b : o.data) b = float_to_fp8_e4m3(static_cast<float>(rng.normal() * 100));
      o.scale.resize(static_cast<size_t>(((rows + 127) / 128) * ((cols + 127) / 128)), 120);
      break;
    case WeightFormat::kFp4Mx32:
      o.data.resize(n / 2);
      for (auto& b : o.data) b = static_cast<uint8_t>(rng.below(256));
      o.scale.resize(n / 32, 124);
      break;
  }
  o.w.data = reinterpret_cast<const std::byte*>(o.data.data());
  o.w.scale = o.scale.empty() ? nullptr : reinterpret_cast<const std::byte*>(o.scale.data());
  return o;
}

// 4096 x 4096: 8-64 MB per format, beyond the caches, as every model weight is.
void BM_Matmul(benchmark::State& state, WeightFormat format) {
  const int64_t rows = 4096, cols = 4096, n = state.range(0);
  const OwnedWeight o = make_weight(format, rows, cols);
  std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    kernels::matmul(o.w, x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(o.w.nbytes()));
  state.counters["weight_MB"] = static_cast<double>(o.w.nbytes()) / 1e6;
}
BENCHMARK_CAPTURE(BM_Matmul, bf16, WeightFormat::kBF16)->Arg(1)->Arg(4)->Arg(16)->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, fp8_block128, WeightFormat::kFp8Block128)
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Matmul, fp4_mx32, WeightFormat::kFp4Mx32)
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->UseRealTime();

// The roofline: measure_read_bandwidth (the best of 3 reads of 256 MiB by every thread of
// the pool; the time includes allocating and first touching it, the counter does not).
void BM_MemoryRead(benchmark::State& state) {
  double best = 0;
  for (auto _ : state) best = std::max(best, measure_read_bandwidth(std::size_t{256} << 20, 3));
  state.counters["read_GB_per_s"] = best / 1e9;
}
BENCHMARK(BM_MemoryRead)->UseRealTime()->Iterations(3);

}  // namespace
}  // namespace flint
