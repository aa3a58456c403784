// Kernel micro-benchmarks, each against the roofline this machine measures:
//  - BM_MatmulDecode: matmul in each weight format at decode shapes (n = 1, 4) on weights
//    beyond the caches; bytes/s counts the weight's bytes (data plus scales) per call, so a
//    kernel that reads at BM_MemoryRead's rate is at the memory roofline;
//  - BM_MatmulPrefill: n = 16, 128 inputs; GFLOP/s against BM_PeakFlops;
//  - BM_MatmulHead: the bench preset's BF16 output head, 1 and 16 inputs, GFLOP/s;
//  - BM_MatmulExperts: a batch-1 decode step's 72 routed FP4 experts (bench preset), bytes/s;
//  - BM_MatmulFewRows: the hyper-connections' 24 x 4096 float32 weight at one input, one
//    call per weight, weights beyond the caches (as between a decode step's layers), bytes/s;
//  - BM_HeadDots / BM_HeadWeightedSums: one token's attention over 256 keys (window plus
//    compressed entries) for 8 heads of 512 dims (bench preset; V4-Flash has 64), GFLOP/s;
//    the second argument is the heads per call (1: each head alone; for head_dots one
//    multiply-add chain at a time, as attention did before);
//  - BM_KvWindowDecode: one layer's window of 128 stored fp8 KV rows decoded to float32
//    (in cache), values/s.
// Entries named *_bf16x declare x bf16-exact (matmul.h: the avx512bf16 variant where the
// CPU has it, as for every FP8/FP4 linear under --quant-simulation official); the others
// run the float32 variant. The label names the variant that ran.
//   build/bench/flint_kernels_bench [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/memory_bandwidth.h"
#include "kernels/dot.h"
#include "kernels/kv_codec.h"
#include "kernels/matmul.h"
#include "kernels/peak_flops.h"

namespace flint {
namespace {

// A random weight [rows, cols] in `format`, owning its bytes: normal values (bf16 exponents
// near 1, no FP8 NaN codes), E8M0 scales near 1. Bytes come from a xorshift generator: a
// 256 MiB weight must not take seconds to make.
struct OwnedWeight {
  std::vector<uint8_t> data, scale;
  WeightMatrix w;
};

OwnedWeight make_weight(WeightFormat format, int64_t rows, int64_t cols) {
  OwnedWeight o;
  o.w.format = format;
  o.w.rows = rows;
  o.w.cols = cols;
  const auto n = static_cast<size_t>(rows * cols);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  switch (format) {
    case WeightFormat::kF32:
      o.data.resize(n * 4);
      for (size_t i = 0; i < n; ++i)
        reinterpret_cast<float*>(o.data.data())[i] = static_cast<float>(next() % 2001) / 1000 - 1;
      break;
    case WeightFormat::kBF16:
      o.data.resize(n * 2);
      for (size_t i = 0; i < n; ++i)  // sign, exponent 2^-4 .. 2^3, random mantissa
        reinterpret_cast<uint16_t*>(o.data.data())[i] =
            static_cast<uint16_t>((next() & 0x807F) | ((123 + next() % 8) << 7));
      break;
    case WeightFormat::kFp8Block128:
      o.data.resize(n);
      for (auto& b : o.data) {
        b = static_cast<uint8_t>(next());
        if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes
      }
      o.scale.resize(static_cast<size_t>(((rows + 127) / 128) * ((cols + 127) / 128)), 120);
      break;
    case WeightFormat::kFp4Mx32:
      o.data.resize(n / 2);
      for (auto& b : o.data) b = static_cast<uint8_t>(next());
      o.scale.resize(n / 32, 124);
      break;
  }
  o.w.data = reinterpret_cast<const std::byte*>(o.data.data());
  o.w.scale = o.scale.empty() ? nullptr : reinterpret_cast<const std::byte*>(o.scale.data());
  o.w.mark_regular_scales();  // as the model binds its weights
  return o;
}

// Decode shapes: 4096 columns and as many rows as make 256 MiB of weight bytes, far beyond
// the caches as a model's weights are (a 4096 x 4096 FP4 weight, 9 MB, would sit in L3).
void BM_MatmulDecode(benchmark::State& state, WeightFormat format, bool bf16_x) {
  const int64_t cols = 4096, n = state.range(0);
  const WeightMatrix probe{format, 128, cols, nullptr, nullptr, DType::F8_E8M0};
  const int64_t rows = static_cast<int64_t>((uint64_t{256} << 20) / (probe.nbytes() / 128));
  const OwnedWeight o = make_weight(format, rows, cols);
  std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    kernels::matmul(o.w, x.data(), n, y.data(), bf16_x);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(bf16_x ? kernels::matmul_isa() : "float32 variant"));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(o.w.nbytes()));
  state.counters["weight_MB"] = static_cast<double>(o.w.nbytes()) / 1e6;
}
// x = 0.5 everywhere: exact in bf16.
#define FLINT_MATMUL_BENCH(fn, name, format, a, b)                           \
  BENCHMARK_CAPTURE(fn, name, format, false)->Arg(a)->Arg(b)->UseRealTime(); \
  BENCHMARK_CAPTURE(fn, name##_bf16x, format, true)->Arg(a)->Arg(b)->UseRealTime();
FLINT_MATMUL_BENCH(BM_MatmulDecode, bf16, WeightFormat::kBF16, 1, 4)
FLINT_MATMUL_BENCH(BM_MatmulDecode, fp8_block128, WeightFormat::kFp8Block128, 1, 4)
FLINT_MATMUL_BENCH(BM_MatmulDecode, fp4_mx32, WeightFormat::kFp4Mx32, 1, 4)

// Prefill shapes: a 4096 x 4096 weight times n inputs; the FLOP/s counter (2 per multiply-
// add) against BM_PeakFlops.
void BM_MatmulPrefill(benchmark::State& state, WeightFormat format, bool bf16_x) {
  const int64_t rows = 4096, cols = 4096, n = state.range(0);
  const OwnedWeight o = make_weight(format, rows, cols);
  std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    kernels::matmul(o.w, x.data(), n, y.data(), bf16_x);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(std::string(bf16_x ? kernels::matmul_isa() : "float32 variant"));
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(rows * cols * n) / 1e9,
      benchmark::Counter::kIsRate);
}
FLINT_MATMUL_BENCH(BM_MatmulPrefill, bf16, WeightFormat::kBF16, 16, 128)
FLINT_MATMUL_BENCH(BM_MatmulPrefill, fp8_block128, WeightFormat::kFp8Block128, 16, 128)
FLINT_MATMUL_BENCH(BM_MatmulPrefill, fp4_mx32, WeightFormat::kFp4Mx32, 16, 128)

// The output head of the bench preset: 129,280 vocabulary rows x 1024 BF16 columns (265 MB,
// streamed from memory) times range(0) float32 inputs, as a decode step of that many
// sequences computes it (its input is not rounded, so it runs the float32 variant).
void BM_MatmulHead(benchmark::State& state) {
  const int64_t rows = 129280, cols = 1024, n = state.range(0);
  const OwnedWeight o = make_weight(WeightFormat::kBF16, rows, cols);
  std::vector<float> x(static_cast<size_t>(n * cols), 0.5f), y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    kernels::matmul(o.w, x.data(), n, y.data(), /*bf16_x=*/false);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * static_cast<double>(rows * cols * n) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MatmulHead)->Arg(1)->Arg(16)->UseRealTime();

// A batch-1 decode step's routed experts on the bench preset: 12 layers x 6 of 64 experts,
// each w1 and w3 (512 x 1024 FP4) in one matmul_many, then w2 (1024 x 512); 768 experts'
// matrices (600 MB) in one buffer, so each step reads experts scattered over it, as a
// model's are in the mmap. range(0) tokens per expert. Bytes/s count the matrices read.
void BM_MatmulExperts(benchmark::State& state) {
  constexpr int64_t kExperts = 768, kInter = 512, kHidden = 1024, kLayers = 12, kTop = 6;
  const int64_t n = state.range(0);
  const OwnedWeight w13 = make_weight(WeightFormat::kFp4Mx32, 2 * kExperts * kInter, kHidden);
  const OwnedWeight w2 = make_weight(WeightFormat::kFp4Mx32, kExperts * kHidden, kInter);
  std::vector<WeightMatrix> gate_up, down;
  for (int64_t e = 0; e < kExperts; ++e) {
    gate_up.push_back(w13.w.row_slice(2 * e * kInter, (2 * e + 1) * kInter));
    gate_up.push_back(w13.w.row_slice((2 * e + 1) * kInter, (2 * e + 2) * kInter));
    down.push_back(w2.w.row_slice(e * kHidden, (e + 1) * kHidden));
  }
  std::vector<float> x(static_cast<size_t>(n * kHidden), 0.5f),
      h(static_cast<size_t>(kTop * 2 * n * kInter), 0.25f),
      y(static_cast<size_t>(kTop * n * kHidden));
  uint64_t pick = 1;
  int64_t bytes = 0;
  for (auto _ : state) {
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      std::vector<kernels::MatmulTask> first, second;
      for (int64_t k = 0; k < kTop; ++k) {
        pick = pick * 6364136223846793005ull + 1442695040888963407ull;
        const auto e = static_cast<size_t>((pick >> 33) % 64 + 64 * static_cast<uint64_t>(layer));
        for (int j = 0; j < 2; ++j)
          first.push_back(
              {&gate_up[2 * e + j], x.data(), n, h.data() + (2 * k + j) * n * kInter, true});
        second.push_back(
            {&down[e], h.data() + 2 * k * n * kInter, n, y.data() + k * n * kHidden, true});
        bytes += static_cast<int64_t>(2 * gate_up[2 * e].nbytes() + down[e].nbytes());
      }
      kernels::matmul_many(first);
      kernels::matmul_many(second);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_MatmulExperts)->Arg(1)->Arg(2)->UseRealTime();

// A matrix of few long rows at one input, cold: the hyper-connections' mixing weight (24 rows
// of 4 x hidden float32 columns), which a decode step multiplies twice per layer. 1,536
// copies (604 MB) in one buffer, visited in a scattered order, so each call finds its
// weight in memory, as the model does after streaming a layer's other weights.
void BM_MatmulFewRows(benchmark::State& state) {
  constexpr int64_t kRows = 24, kCols = 4096, kCopies = 1536;
  const OwnedWeight all = make_weight(WeightFormat::kF32, kRows * kCopies, kCols);
  std::vector<float> x(static_cast<size_t>(kCols), 0.5f), y(static_cast<size_t>(kRows));
  int64_t bytes = 0, at = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < kCopies; ++i) {
      at = (at + 389) % kCopies;  // 389 is prime to kCopies: every copy once per iteration
      const WeightMatrix w = all.w.row_slice(at * kRows, (at + 1) * kRows);
      kernels::matmul(w, x.data(), 1, y.data());
      bytes += static_cast<int64_t>(w.nbytes());
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_MatmulFewRows)->UseRealTime();

// Keys and per-head inputs in cache, as attention finds them for one token.
struct HeadProblem {
  static constexpr int64_t kDim = 512, kKeys = 256;
  std::vector<float> q, keys, w, out;
  std::vector<const float*> rows;
  explicit HeadProblem(int64_t heads)
      : q(static_cast<size_t>(heads * kDim), 0.25f),
        keys(static_cast<size_t>(kKeys * kDim), 0.5f),
        w(static_cast<size_t>(heads * kKeys), 1.0f / kKeys),
        out(static_cast<size_t>(heads * std::max(kDim, kKeys))) {
    for (int64_t k = 0; k < kKeys; ++k) rows.push_back(keys.data() + k * kDim);
  }
};

void head_rate(benchmark::State& state, int64_t heads) {
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 *
          static_cast<double>(heads * HeadProblem::kKeys * HeadProblem::kDim) / 1e9,
      benchmark::Counter::kIsRate);
}

// range(0) heads, range(1) of them per call.
void BM_HeadDots(benchmark::State& state) {
  const int64_t heads = state.range(0), together = state.range(1);
  HeadProblem p(heads);
  for (auto _ : state) {
    for (int64_t h = 0; h < heads; h += together)
      kernels::head_dots(p.q.data() + h * HeadProblem::kDim, together, p.rows.data(),
                         HeadProblem::kKeys, HeadProblem::kDim,
                         p.out.data() + h * HeadProblem::kKeys, HeadProblem::kKeys);
    benchmark::DoNotOptimize(p.out.data());
  }
  head_rate(state, heads);
}
BENCHMARK(BM_HeadDots)->Args({8, 8})->Args({8, 1})->UseRealTime();

void BM_HeadWeightedSums(benchmark::State& state) {
  const int64_t heads = state.range(0), together = state.range(1);
  HeadProblem p(heads);
  for (auto _ : state) {
    for (int64_t h = 0; h < heads; h += together)
      kernels::head_weighted_sums(p.w.data() + h * HeadProblem::kKeys, HeadProblem::kKeys, together,
                                  p.rows.data(), HeadProblem::kKeys, HeadProblem::kDim,
                                  p.out.data() + h * HeadProblem::kDim);
    benchmark::DoNotOptimize(p.out.data());
  }
  head_rate(state, heads);
}
BENCHMARK(BM_HeadWeightedSums)->Args({8, 8})->Args({8, 1})->UseRealTime();

// A decode step's window read on one layer of the bench preset: 128 stored KV rows of 512
// values (448 E4M3 in blocks of 64 with E8M0 scales, 64 bf16 rope dims), decoded to
// float32 as attention reads them; values/s.
void BM_KvWindowDecode(benchmark::State& state) {
  const kernels::KvRowFormat f{kernels::KvDtype::kFp8, 512, 64};
  constexpr int64_t kRows = 128;
  std::vector<float> rows(static_cast<size_t>(kRows * f.dim));
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (auto& v : rows) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<int64_t>(seed >> 40) - (int64_t{1} << 23)) * 0x1p-22f;
  }
  std::vector<uint8_t> stored(static_cast<size_t>(kRows * f.bytes()));
  kernels::encode_kv_rows(f, rows.data(), kRows, stored.data());
  for (auto _ : state) {
    kernels::decode_kv_rows(f, stored.data(), kRows, rows.data());
    benchmark::DoNotOptimize(rows.data());
  }
  state.counters["values_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(kRows * f.dim),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_KvWindowDecode)->UseRealTime();

void BM_PeakFlops(benchmark::State& state) {
  kernels::PeakFlops best;
  for (auto _ : state) {
    const kernels::PeakFlops p = kernels::measure_peak_flops();
    best.f32_fma = std::max(best.f32_fma, p.f32_fma);
    best.bf16_dot = std::max(best.bf16_dot, p.bf16_dot);
  }
  state.counters["f32_fma_GFLOP_per_s"] = best.f32_fma / 1e9;
  state.counters["bf16_dot_GFLOP_per_s"] = best.bf16_dot / 1e9;
}
BENCHMARK(BM_PeakFlops)->UseRealTime()->Iterations(3);

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
