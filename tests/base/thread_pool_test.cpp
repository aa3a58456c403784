#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

namespace flint {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (std::size_t threads : {1u, 2u, 4u}) {
    ThreadPool pool(threads);
    for (std::size_t n : {0u, 1u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 3, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) hits[i]++;
      });
      for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

// Guided chunks: the first takes 1/(2 x threads) of the range, each later one 1/(2 x
// threads) of what is left, never less than the grain, so the last chunks are a grain and
// the threads finish close together.
TEST(ThreadPool, ChunksShrinkFromAShareToTheGrain) {
  for (std::size_t threads : {2u, 4u}) {
    ThreadPool pool(threads);
    constexpr std::size_t kN = 1000, kGrain = 3;
    std::mutex mutex;
    std::vector<std::pair<std::size_t, std::size_t>> chunks;
    pool.parallel_for(kN, kGrain, [&](std::size_t b, std::size_t e) {
      std::lock_guard lock(mutex);
      chunks.emplace_back(b, e);
    });
    std::sort(chunks.begin(), chunks.end());
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.front(), std::make_pair(std::size_t{0}, kN / (2 * threads)));
    std::size_t at = 0;
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      const auto [b, e] = chunks[i];
      EXPECT_EQ(b, at) << "chunks tile the range";
      EXPECT_EQ(e - b, std::min(kN - b, std::max(kGrain, (kN - b) / (2 * threads)))) << "at " << b;
      at = e;
    }
    EXPECT_EQ(at, kN);
    EXPECT_LE(chunks.back().second - chunks.back().first, kGrain);
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  pool.parallel_for(8, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      pool.parallel_for(4, 1, [&](std::size_t b2, std::size_t e2) { total += int(e2 - b2); });
    }
  });
  EXPECT_EQ(total.load(), 32);
}

TEST(ThreadPool, ManyShortJobs) {
  ThreadPool pool(2);
  std::atomic<long> sum{0};
  for (int rep = 0; rep < 2000; ++rep) {
    pool.parallel_for(16, 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) sum += long(i);
    });
  }
  EXPECT_EQ(sum.load(), 2000L * 120);
}

// A job posted the moment the pool exists (its workers may not have started yet) and jobs
// after the workers fell asleep (past the spin) both complete.
TEST(ThreadPool, JobsRightAfterStartAndAfterSleep) {
  for (int rep = 0; rep < 50; ++rep) {
    ThreadPool pool(3);
    std::atomic<int> count{0};
    pool.parallel_for(64, 1, [&](std::size_t b, std::size_t e) { count += int(e - b); });
    EXPECT_EQ(count.load(), 64);
  }
  ThreadPool pool(2);
  std::atomic<int> count{0};
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers go to sleep
    pool.parallel_for(64, 1, [&](std::size_t b, std::size_t e) { count += int(e - b); });
  }
  EXPECT_EQ(count.load(), 3 * 64);
}

// Two threads calling one pool at once: each call completes and covers its range exactly
// once (the second runs inline while the first holds the pool).
TEST(ThreadPool, ConcurrentCallersEachComplete) {
  ThreadPool pool(2);
  std::atomic<long> sums[2] = {0, 0};
  auto caller = [&](int who) {
    for (int rep = 0; rep < 500; ++rep) {
      pool.parallel_for(32, 1, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) sums[who] += long(i);
      });
    }
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  EXPECT_EQ(sums[0].load(), 500L * 496);
  EXPECT_EQ(sums[1].load(), 500L * 496);
}

}  // namespace
}  // namespace flint
