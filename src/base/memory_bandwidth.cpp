#include "base/memory_bandwidth.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "base/timer.h"

namespace flint {

double measure_read_bandwidth(std::size_t bytes, int repeats) {
  const std::size_t n = std::max<std::size_t>(bytes / sizeof(uint64_t), 1024);
  std::unique_ptr<uint64_t[]> data(new uint64_t[n]);  // uninitialised: touched below
  ThreadPool& pool = thread_pool();
  const std::size_t grain = (n + pool.size() - 1) / pool.size();
  pool.parallel_for(n, grain, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) data[i] = i;
  });
  return measure_read_bandwidth_of(data.get(), n * sizeof(uint64_t), repeats);
}

double measure_read_bandwidth_of(const void* region, std::size_t bytes, int repeats) {
  // Whole 8-byte words from the first aligned one.
  const auto begin = reinterpret_cast<uintptr_t>(region);
  const uintptr_t aligned = (begin + 7) / 8 * 8;
  const std::size_t skip = aligned - begin;
  const std::size_t n = bytes > skip ? (bytes - skip) / sizeof(uint64_t) : 0;
  if (n == 0) return 0;
  const auto* data = reinterpret_cast<const uint64_t*>(aligned);
  ThreadPool& pool = thread_pool();
  const std::size_t grain = (n + pool.size() - 1) / pool.size();
  std::vector<uint64_t> sums(pool.size() * 8 + 8, 0);  // kept so the reads are not dropped
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    Stopwatch clock;
    pool.parallel_for(n, grain, [&](std::size_t b, std::size_t e) {
      // Eight independent accumulators: the loop is bound by loads, not by an add chain.
      uint64_t acc[8] = {};
      std::size_t i = b;
      for (; i + 8 <= e; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += data[i + static_cast<std::size_t>(k)];
      }
      for (; i < e; ++i) acc[0] += data[i];
      uint64_t s = 0;
      for (uint64_t a : acc) s += a;
      sums[(b / grain) % sums.size()] += s;
    });
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / clock.seconds());
  }
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return best;
}

}  // namespace flint
