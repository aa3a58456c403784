#include "kv/page_pool.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"
#include "base/error.h"

namespace flint::kv {

PagePool::PagePool(int64_t num_pages, int64_t page_bytes) : page_bytes_(page_bytes) {
  FLINT_CHECK(num_pages > 0 && num_pages < (int64_t{1} << 31) && page_bytes > 0 &&
              page_bytes % 64 == 0);
  // Anonymous memory costs nothing until first written, so a large pool only takes RAM as
  // sequences fill it (and NORESERVE keeps the kernel's overcommit heuristic out of it).
  const size_t bytes = static_cast<size_t>(num_pages * page_bytes);
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (mapped == MAP_FAILED) {
    throw Error("cannot map the KV cache: {} pages of {} bytes: {}", num_pages, page_bytes,
                std::strerror(errno));
  }
  arena_ = static_cast<uint8_t*>(mapped);
  arena_bytes_ = bytes;
  const size_t n = static_cast<size_t>(num_pages);
  refs_.assign(n, 0);
  cached_.assign(n, 0);
  prev_.assign(n + 1, 0);
  next_.assign(n + 1, 0);
  const int32_t sentinel = static_cast<int32_t>(n);
  prev_[n] = next_[n] = sentinel;
  for (int32_t p = 0; p < sentinel; ++p) push_back(p);
  num_free_ = num_pages;
}

PagePool::~PagePool() { munmap(arena_, arena_bytes_); }

void PagePool::unlink(int32_t p) {
  next_[static_cast<size_t>(prev_[static_cast<size_t>(p)])] = next_[static_cast<size_t>(p)];
  prev_[static_cast<size_t>(next_[static_cast<size_t>(p)])] = prev_[static_cast<size_t>(p)];
}

void PagePool::push_front(int32_t p) {
  const int32_t s = static_cast<int32_t>(refs_.size());
  prev_[static_cast<size_t>(p)] = s;
  next_[static_cast<size_t>(p)] = next_[static_cast<size_t>(s)];
  prev_[static_cast<size_t>(next_[static_cast<size_t>(s)])] = p;
  next_[static_cast<size_t>(s)] = p;
}

void PagePool::push_back(int32_t p) {
  const int32_t s = static_cast<int32_t>(refs_.size());
  next_[static_cast<size_t>(p)] = s;
  prev_[static_cast<size_t>(p)] = prev_[static_cast<size_t>(s)];
  next_[static_cast<size_t>(prev_[static_cast<size_t>(s)])] = p;
  prev_[static_cast<size_t>(s)] = p;
}

int32_t PagePool::allocate() {
  const size_t s = refs_.size();
  const int32_t p = next_[s];
  if (p == static_cast<int32_t>(s)) return -1;
  unlink(p);
  --num_free_;
  if (cached_[static_cast<size_t>(p)]) {
    --num_cached_free_;
    if (on_evict) on_evict(p);
    cached_[static_cast<size_t>(p)] = 0;
  }
  refs_[static_cast<size_t>(p)] = 1;
  return p;
}

void PagePool::retain(int32_t p) {
  int32_t& r = refs_[static_cast<size_t>(p)];
  if (r == 0) {
    FLINT_CHECK(cached_[static_cast<size_t>(p)], "retaining free page {} that is not cached", p);
    unlink(p);
    --num_free_;
    --num_cached_free_;
  }
  ++r;
}

void PagePool::release(int32_t p) {
  int32_t& r = refs_[static_cast<size_t>(p)];
  FLINT_CHECK(r > 0, "page {} released more often than taken", p);
  if (--r > 0) return;
  ++num_free_;
  if (cached_[static_cast<size_t>(p)]) {
    ++num_cached_free_;
    push_back(p);
  } else {
    push_front(p);
  }
}

void PagePool::set_cached(int32_t p, bool cached) {
  uint8_t& c = cached_[static_cast<size_t>(p)];
  if (static_cast<bool>(c) == cached) return;
  if (refs_[static_cast<size_t>(p)] == 0) {  // a free page moves to its new place in the list
    unlink(p);
    if (cached) {
      ++num_cached_free_;
      push_back(p);
    } else {
      --num_cached_free_;
      push_front(p);
    }
  }
  c = cached ? 1 : 0;
}

}  // namespace flint::kv
