#include "base/page_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "base/check.h"

namespace flint {
namespace {

// Blocks are mapped in multiples of 2 MiB, so transparent huge pages can back them.
constexpr size_t kGranule = size_t{2} << 20;
// A cached block serves a request up to this much smaller than itself (in quarters), so that
// a slightly shorter step reuses the last step's buffers rather than mapping its own.
constexpr size_t kSlackQuarters = 5;

struct Cache {
  std::mutex mutex;
  std::vector<std::pair<size_t, void*>> free;  // (mapped bytes, block), unordered
  std::unordered_map<void*, size_t> used;      // block -> mapped bytes
  size_t cached = 0, in_use = 0, peak = 0;
  int64_t maps = 0;

  void unmap_free(size_t i) {
    auto [bytes, block] = free[i];
    munmap(block, bytes);
    cached -= bytes;
    free[i] = free.back();
    free.pop_back();
  }
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may be released during exit
  return *c;
}

}  // namespace

void* page_cache_acquire(size_t bytes) {
  const size_t want = (bytes + kGranule - 1) / kGranule * kGranule;
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  // Best fit among cached blocks no more than a quarter larger than the request.
  size_t best = c.free.size();
  for (size_t i = 0; i < c.free.size(); ++i) {
    const size_t have = c.free[i].first;
    if (have >= want && have * 4 <= want * kSlackQuarters &&
        (best == c.free.size() || have < c.free[best].first)) {
      best = i;
    }
  }
  if (best != c.free.size()) {
    auto [have, block] = c.free[best];
    c.free[best] = c.free.back();
    c.free.pop_back();
    c.cached -= have;
    c.in_use += have;
    c.peak = std::max(c.peak, c.in_use);
    c.used.emplace(block, have);
    return block;
  }
  // Keep what is mapped within the most ever in use at once (or what is in use now with this
  // block, if that is more): drop the smallest cached blocks first, the likeliest to be
  // outgrown.
  const size_t bound = std::max(c.peak, c.in_use + want);
  while (!c.free.empty() && c.cached + c.in_use + want > bound) {
    size_t smallest = 0;
    for (size_t i = 1; i < c.free.size(); ++i) {
      if (c.free[i].first < c.free[smallest].first) smallest = i;
    }
    c.unmap_free(smallest);
  }
  void* block = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) throw std::bad_alloc();
  madvise(block, want, MADV_HUGEPAGE);  // a hint: without THP the block still works
  ++c.maps;
  c.in_use += want;
  c.peak = std::max(c.peak, c.in_use);
  c.used.emplace(block, want);
  return block;
}

void page_cache_release(void* block, size_t bytes) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  auto it = c.used.find(block);
  FLINT_CHECK(it != c.used.end() && it->second >= bytes,
              "page_cache_release of a block the cache did not hand out");
  c.in_use -= it->second;
  c.cached += it->second;
  c.free.emplace_back(it->second, block);
  c.used.erase(it);
}

PageCacheStats page_cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return {c.cached + c.in_use, c.cached, c.peak, c.maps};
}

void page_cache_trim() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  while (!c.free.empty()) c.unmap_free(c.free.size() - 1);
}

}  // namespace flint
