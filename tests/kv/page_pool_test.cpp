// The page pool against a plain model of it: reference counts, the free list's order
// (uncached pages first, then cached ones least recently released first) and evictions.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>

#include "base/rng.h"
#include "kv/page_pool.h"

namespace flint::kv {
namespace {

TEST(PagePool, EvictionOrder) {
  PagePool pool(4, 64);
  std::vector<int32_t> evicted;
  pool.on_evict = [&](int32_t p) { evicted.push_back(p); };
  int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate(), d = pool.allocate();
  EXPECT_EQ(pool.allocate(), -1);
  pool.set_cached(a, true);
  pool.set_cached(b, true);
  pool.release(b);  // cached: tail
  pool.release(a);  // cached: tail, after b
  pool.release(c);  // uncached: head
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(pool.num_cached_free(), 2);
  EXPECT_EQ(pool.allocate(), c);  // nobody can find c again: reused first
  EXPECT_TRUE(evicted.empty());
  pool.retain(a);  // a prefix hit takes a back from the free list
  EXPECT_EQ(pool.refcount(a), 1);
  EXPECT_EQ(pool.allocate(), b);  // b, the least recently released cached page, goes
  EXPECT_EQ(evicted, std::vector<int32_t>{b});
  EXPECT_FALSE(pool.cached(b));
  EXPECT_EQ(pool.allocate(), -1);
  (void)d;
}

TEST(PagePool, SharedPagesFreeOnLastRelease) {
  PagePool pool(2, 64);
  int32_t a = pool.allocate();
  pool.retain(a);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2);
}

// Random operations against a reference: a deque in eviction order.
TEST(PagePool, MatchesReferenceUnderRandomOperations) {
  const int32_t n = 32;
  PagePool pool(n, 64);
  std::vector<int32_t> evicted;
  pool.on_evict = [&](int32_t p) { evicted.push_back(p); };
  std::vector<int32_t> refs(n, 0);
  std::vector<bool> cached(n, false);
  std::deque<int32_t> order;  // free pages, next to allocate first
  for (int32_t p = 0; p < n; ++p) order.push_back(p);
  Rng rng(3);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = rng.below(4);
    if (op == 0) {
      const int32_t got = pool.allocate();
      if (order.empty()) {
        ASSERT_EQ(got, -1);
        continue;
      }
      const int32_t want = order.front();
      order.pop_front();
      ASSERT_EQ(got, want);
      if (cached[static_cast<size_t>(want)]) {
        ASSERT_FALSE(evicted.empty());
        ASSERT_EQ(evicted.back(), want);
        cached[static_cast<size_t>(want)] = false;
      }
      refs[static_cast<size_t>(want)] = 1;
    } else {
      const int32_t p = static_cast<int32_t>(rng.below(n));
      auto& r = refs[static_cast<size_t>(p)];
      if (op == 1 && r > 0) {
        pool.release(p);
        if (--r == 0) {
          if (cached[static_cast<size_t>(p)]) {
            order.push_back(p);
          } else {
            order.push_front(p);
          }
        }
      } else if (op == 2 && (r > 0 || cached[static_cast<size_t>(p)])) {
        pool.retain(p);
        if (r++ == 0) order.erase(std::find(order.begin(), order.end(), p));
      } else if (op == 3 && r > 0) {
        const bool c = rng.below(2) == 0;
        pool.set_cached(p, c);
        cached[static_cast<size_t>(p)] = c;
      }
    }
    ASSERT_EQ(pool.num_free(), static_cast<int64_t>(order.size()));
  }
}

}  // namespace
}  // namespace flint::kv
