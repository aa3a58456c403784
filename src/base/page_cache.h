// A cache of large mapped blocks for the activation buffers of a forward pass.
//
// glibc serves every allocation above its mmap threshold (32 MiB at most, however it is
// set) with a fresh mmap and unmaps it on free, so a step of a few thousand tokens, whose
// query or expert buffers exceed that, page-faulted and zeroed hundreds of MiB again in every
// layer (perf, 4,096-token steps of the bench preset: page faults 19% and memset 19% of
// block_forward). Blocks of at least kPageCacheMinBytes come from here instead: a freed block
// stays mapped and the next request of about its size takes it back.
//
// Memory bound: what the cache maps never exceeds the most its blocks ever held in use at
// once. When a request finds no cached block that fits, cached blocks are unmapped, smallest
// first, until the mapped total (cached + in use + the new block) is no more than the larger
// of that peak and what is in use with the new block. Cost: a mutex and a scan of the cached
// blocks (a few dozen at most) per large allocation; smaller ones go to operator new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace flint {

inline constexpr size_t kPageCacheMinBytes = size_t{16} << 20;

// A block of at least `bytes` (>= kPageCacheMinBytes), page-aligned, its contents undefined.
// Throws std::bad_alloc when the system has no memory for it.
void* page_cache_acquire(size_t bytes);
// Returns a block from page_cache_acquire(bytes) with the same `bytes`.
void page_cache_release(void* block, size_t bytes);

struct PageCacheStats {
  size_t mapped_bytes = 0;  // cached + in use
  size_t cached_bytes = 0;  // free, kept mapped
  size_t peak_bytes = 0;    // the most in use at once
  int64_t maps = 0;         // mmap calls so far
};
PageCacheStats page_cache_stats();
// Unmaps every cached block (tests; a server could call it when idle).
void page_cache_trim();

// std::allocator, except that arrays of kPageCacheMinBytes and more come from the cache.
template <class T>
struct PageCacheAllocator {
  using value_type = T;
  PageCacheAllocator() = default;
  template <class U>
  PageCacheAllocator(const PageCacheAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kPageCacheMinBytes) return static_cast<T*>(page_cache_acquire(bytes));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kPageCacheMinBytes) return page_cache_release(p, bytes);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const PageCacheAllocator<U>&) const noexcept {
    return true;
  }
};

// The activation buffers of a forward pass: a std::vector whose large arrays are cached.
template <class T>
using PageCachedVector = std::vector<T, PageCacheAllocator<T>>;

}  // namespace flint
