// The KV page pool: one arena of equal pages and their metadata (reference count, cached
// flag, free-list links). Knows nothing of what a page holds; the prefix cache decides
// which pages are cached, the KV cache which sequence holds which page.
//
// Unreferenced pages sit on one free list in eviction order, as vLLM's block pool does:
// pages nobody can find again at the head (reused first), cached pages at the tail in the
// order they were released (least recently used first). Taking a cached page back
// (retain) and allocating are O(1) through the intrusive links. Not thread-safe: the
// engine thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace flint::kv {

class PagePool {
 public:
  PagePool(int64_t num_pages, int64_t page_bytes);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int64_t num_pages() const { return static_cast<int64_t>(refs_.size()); }
  int64_t page_bytes() const { return page_bytes_; }
  int64_t num_free() const { return num_free_; }  // unreferenced (free or cached)
  int64_t num_cached_free() const { return num_cached_free_; }

  // An unreferenced page with one reference, or -1 if every page is referenced. A cached
  // page is evicted first: on_evict(page) runs while its bytes are intact, then the
  // page is uncached.
  int32_t allocate();
  void retain(int32_t page);
  void release(int32_t page);
  int32_t refcount(int32_t page) const { return refs_[static_cast<size_t>(page)]; }

  void set_cached(int32_t page, bool cached);
  bool cached(int32_t page) const { return cached_[static_cast<size_t>(page)] != 0; }

  uint8_t* data(int32_t page) { return arena_ + static_cast<int64_t>(page) * page_bytes_; }
  const uint8_t* data(int32_t page) const {
    return arena_ + static_cast<int64_t>(page) * page_bytes_;
  }

  std::function<void(int32_t page)> on_evict;

 private:
  void unlink(int32_t page);
  void push_front(int32_t page);
  void push_back(int32_t page);

  int64_t page_bytes_;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  std::vector<int32_t> refs_;
  std::vector<uint8_t> cached_;
  std::vector<int32_t> prev_, next_;  // free list; index num_pages is the sentinel
  int64_t num_free_ = 0, num_cached_free_ = 0;
};

}  // namespace flint::kv
