#include "base/thread_pool.h"

#include <algorithm>
#include <memory>

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
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunks() {
  while (true) {
    std::size_t begin;
    {
      std::lock_guard lock(mutex_);
      if (next_ >= n_) return;
      begin = next_;
      next_ += chunk_;
    }
    (*body_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::worker_loop() {
  tls_inside_pool = true;
  std::size_t seen = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++busy_;
    }
    run_chunks();
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(std::size_t n, std::size_t grain,
                              const std::function<void(std::size_t, std::size_t)>& body) {
  if (n == 0) return;
  grain = std::max<std::size_t>(1, grain);
  if (workers_.empty() || tls_inside_pool || n <= grain) {
    body(0, n);
    return;
  }
  // About four chunks per thread balances uneven work without much locking.
  std::size_t chunk = std::max(grain, (n + size() * 4 - 1) / (size() * 4));
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    n_ = n;
    chunk_ = chunk;
    next_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  tls_inside_pool = true;
  run_chunks();
  tls_inside_pool = false;
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0 && next_ >= n_; });
  body_ = nullptr;
}

namespace {
std::unique_ptr<ThreadPool>& pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& thread_pool() {
  auto& slot = pool_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(std::max(1u, std::thread::hardware_concurrency()));
  return *slot;
}

void set_thread_count(std::size_t threads) {
  pool_slot() =
      std::make_unique<ThreadPool>(threads == 0 ? std::thread::hardware_concurrency() : threads);
}

}  // namespace flint
