#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "base/cpu_topology.h"

namespace flint {

namespace {
thread_local bool tls_inside_pool = false;
}

ThreadPool::ThreadPool(std::size_t threads) {
  threads = std::max<std::size_t>(1, threads);
  workers_.reserve(threads - 1);
  for (std::size_t i = 0; i + 1 < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

// Guided chunks: each takes a 1/(2 x threads) share of what is left, at least the grain.
// The first chunks are long (few atomic operations, long contiguous runs of weights for the
// prefetchers); the last ones are a grain, so the threads finish within about one grain of
// each other. Fixed chunks of n / (4 x threads) left one thread waiting up to a chunk at
// the end of every region: 9.0-9.4% of decode samples in the pool's waits at batch 1,
// 10.4-11.0% at batch 16, against 6.8-7.8% and 8.4-8.7% with guided chunks.
void ThreadPool::run_chunks() {
  const std::size_t parts = 2 * size();
  std::size_t begin = next_.load(std::memory_order_relaxed);
  while (begin < n_) {
    const std::size_t len = std::max(grain_, (n_ - begin) / parts);
    if (!next_.compare_exchange_weak(begin, begin + len, std::memory_order_relaxed)) continue;
    (*body_)(begin, std::min(n_, begin + len));
    begin = next_.load(std::memory_order_relaxed);
  }
}

namespace {
void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

void ThreadPool::worker_loop() {
  tls_inside_pool = true;
  // Generation 0 is the pool's start: a job may be posted before this thread runs.
  std::size_t seen = 0;
  while (true) {
    // Spin first: the next call of a forward pass usually comes within microseconds.
    const auto spin_until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    std::size_t current = generation_.load(std::memory_order_acquire);
    for (int i = 0; current == seen; ++i) {
      cpu_relax();
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_until) break;
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stop_.load()) return;
    run_chunks();
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(std::size_t n, std::size_t grain,
                              const std::function<void(std::size_t, std::size_t)>& body) {
  if (n == 0) return;
  grain = std::max<std::size_t>(1, grain);
  // A call from a second thread while a job runs (the pool serves one caller at a time)
  // runs inline rather than overwrite the running job.
  if (workers_.empty() || tls_inside_pool || n <= grain || in_use_.exchange(true)) {
    body(0, n);
    return;
  }
  body_ = &body;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  pending_.store(workers_.size(), std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);  // a worker about to sleep sees the bump or the notify
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  tls_inside_pool = true;
  run_chunks();
  tls_inside_pool = false;
  // Every worker takes part in every job (it may find no chunk left), so the job's state
  // can be reused as soon as pending_ reaches zero.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < (1 << 16)) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  body_ = nullptr;
  in_use_.store(false, std::memory_order_release);
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& thread_pool() {
  auto& slot = pool_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(static_cast<std::size_t>(default_thread_count()));
  return *slot;
}

void set_thread_count(std::size_t threads) {
  pool_slot() = std::make_unique<ThreadPool>(
      threads == 0 ? static_cast<std::size_t>(default_thread_count()) : threads);
}

}  // namespace flint
