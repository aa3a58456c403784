// The page cache against its contract: a freed block serves the next request of about its
// size without a new mapping, contents of blocks in use are never shared, what it maps stays
// within the most ever in use at once, and vectors built on it start zeroed as std::vector.
#include "base/page_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace flint {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(PageCache, AFreedBlockServesTheNextRequestOfAboutItsSize) {
  page_cache_trim();
  const int64_t maps0 = page_cache_stats().maps;
  void* a = page_cache_acquire(20 * kMiB);
  page_cache_release(a, 20 * kMiB);
  void* b = page_cache_acquire(19 * kMiB);  // fits in the cached 20 MiB
  EXPECT_EQ(b, a);
  EXPECT_EQ(page_cache_stats().maps, maps0 + 1);
  page_cache_release(b, 19 * kMiB);
  void* c = page_cache_acquire(40 * kMiB);  // larger than anything cached
  EXPECT_EQ(page_cache_stats().maps, maps0 + 2);
  page_cache_release(c, 40 * kMiB);
  void* d = page_cache_acquire(16 * kMiB);  // the 40 MiB block is too large to hand out for it
  EXPECT_NE(d, c);
  page_cache_release(d, 16 * kMiB);
  page_cache_trim();
  EXPECT_EQ(page_cache_stats().mapped_bytes, 0u);
}

TEST(PageCache, BlocksInUseKeepTheirContentsAndMappedStaysWithinThePeak) {
  page_cache_trim();
  std::mt19937 rng(7);
  struct Live {
    unsigned char* p;
    size_t bytes;
    unsigned char tag;
  };
  std::vector<Live> live;
  for (int op = 0; op < 300; ++op) {
    const bool take = live.empty() || (live.size() < 3 && rng() % 2 == 0);
    if (take) {
      const size_t bytes = kPageCacheMinBytes + rng() % (48 * kMiB);
      auto* p = static_cast<unsigned char*>(page_cache_acquire(bytes));
      const auto tag = static_cast<unsigned char>(op);
      p[0] = tag;  // first and last byte: the whole range belongs to this block
      p[bytes - 1] = tag;
      live.push_back({p, bytes, tag});
    } else {
      const size_t i = rng() % live.size();
      EXPECT_EQ(live[i].p[0], live[i].tag) << "op " << op;
      EXPECT_EQ(live[i].p[live[i].bytes - 1], live[i].tag) << "op " << op;
      page_cache_release(live[i].p, live[i].bytes);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const PageCacheStats s = page_cache_stats();
    ASSERT_LE(s.mapped_bytes, s.peak_bytes) << "op " << op;
  }
  for (const Live& l : live) page_cache_release(l.p, l.bytes);
  const PageCacheStats s = page_cache_stats();
  EXPECT_LT(s.maps, 150) << "cached blocks were not reused";
  page_cache_trim();
}

TEST(PageCache, VectorsTakeLargeArraysFromTheCacheAndStartZeroed) {
  page_cache_trim();
  const int64_t maps0 = page_cache_stats().maps;
  const size_t n = 8 * kMiB / sizeof(float) * 3;  // 24 MiB
  {
    PageCachedVector<float> v(n);
    std::fill(v.begin(), v.end(), 1.0f);
    PageCachedVector<float> small(1000, 2.0f);  // operator new
    EXPECT_EQ(page_cache_stats().maps, maps0 + 1);
  }
  PageCachedVector<float> again(n);  // the same, dirty block
  EXPECT_EQ(page_cache_stats().maps, maps0 + 1);
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(again[i], 0.0f) << i;
  EXPECT_EQ(again[n - 1], 0.0f);
}

TEST(PageCacheDeathTest, ReleasingABlockItDidNotHandOutIsABug) {
  std::vector<char> foreign(kPageCacheMinBytes);
  EXPECT_DEATH(page_cache_release(foreign.data(), foreign.size()), "did not hand out");
}

}  // namespace
}  // namespace flint
