// A fixed pool of worker threads for data-parallel loops.
//
// parallel_for splits [0, n) into chunks of at least `grain` items and runs `body(begin,
// end)` on the workers and the calling thread; it returns when every chunk is done.
// Calls from inside a body run serially (no nested parallelism, no deadlock).
// Cost: one wake-up of the workers per call (a few microseconds), so use it for loops of
// at least tens of microseconds of work.
#pragma once

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

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t, std::size_t)>* body_ = nullptr;
  std::size_t n_ = 0;
  std::size_t chunk_ = 1;
  std::size_t next_ = 0;  // next chunk start, guarded by mutex_
  std::size_t busy_ = 0;  // workers inside the current job
  std::size_t generation_ = 0;
  bool stop_ = false;
};

// The process-wide pool used by kernels. Sized by set_thread_count (the --threads flag);
// by default one thread per available core.
ThreadPool& thread_pool();
void set_thread_count(std::size_t threads);

// Shorthand for thread_pool().parallel_for.
inline void parallel_for(std::size_t n, std::size_t grain,
                         const std::function<void(std::size_t, std::size_t)>& body) {
  thread_pool().parallel_for(n, grain, body);
}

}  // namespace flint
