// A fixed pool of worker threads for data-parallel loops.
//
// parallel_for splits [0, n) into chunks of at least `grain` items and runs `body(begin,
// end)` on the workers and the calling thread; it returns when every chunk is done.
// Calls from inside a body, and calls from another thread while a job runs, run serially
// on the calling thread (no nested parallelism, no deadlock).
// Cost: workers spin for a while (kSpinMicros) after each job before they sleep, so the
// back-to-back calls of a forward pass start in well under a microsecond; after a pause a
// call pays one futex wake-up (tens of microseconds on a virtual machine). Chunks are
// handed out by an atomic counter, long ones first and a grain at the end (guided).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flint {

class ThreadPool {
 public:
  // `threads` counts the calling thread: ThreadPool(1) runs everything inline.
  explicit ThreadPool(std::size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::size_t size() const { return workers_.size() + 1; }

  void parallel_for(std::size_t n, std::size_t grain,
                    const std::function<void(std::size_t, std::size_t)>& body);

 private:
  void worker_loop();
  void run_chunks();

  static constexpr int kSpinMicros = 200;

  std::vector<std::thread> workers_;
  std::mutex mutex_;  // guards sleeping on wake_ (generation_ changes under it)
  std::condition_variable wake_;
  // The current job: written by the caller before generation_ is bumped (release), read by
  // workers after they see the new generation (acquire).
  const std::function<void(std::size_t, std::size_t)>* body_ = nullptr;
  std::size_t n_ = 0;
  std::size_t grain_ = 1;
  std::atomic<std::size_t> next_{0};     // next chunk start
  std::atomic<std::size_t> pending_{0};  // workers that have not finished the current job
  std::atomic<std::size_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> in_use_{false};  // a caller's job is running
};

// The process-wide pool used by kernels. Sized by set_thread_count (the --threads flag);
// by default one thread per physical core the process may run on (cpu_topology.h).
ThreadPool& thread_pool();
void set_thread_count(std::size_t threads);

// A grain for items of `values_per_item` values each of light elementwise work: chunks of
// about 16K values, so that a split is worth a wake-up and a single decode token stays on
// the calling thread.
inline std::size_t grain_for(long long values_per_item) {
  const long long per = values_per_item > 0 ? values_per_item : 1;
  return static_cast<std::size_t>(per >= (16 << 10) ? 1 : (16 << 10) / per);
}

// Shorthand for thread_pool().parallel_for.
inline void parallel_for(std::size_t n, std::size_t grain,
                         const std::function<void(std::size_t, std::size_t)>& body) {
  thread_pool().parallel_for(n, grain, body);
}

}  // namespace flint
