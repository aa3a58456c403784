// One sequence's view of the paged KV pool: its block table (a page per slot per block,
// kv_layout.h) and its compressors' pending rows, behind the model's SequenceKv
// interface. Rows are encoded to the layout's formats on write and decoded on read.
//
// The KV cache (kv_cache.h) fills the block table before a forward call (every block the
// new tokens touch has all its pages) and trims it after; the model only reads and writes
// rows. Not thread-safe; owned by the engine thread through the KV cache.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_layout.h"
#include "kv/page_pool.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/kv_store.h"

namespace flint::kv {

class PagedSequence;

class PagedLayerKv final : public dsv4::LayerKv {
 public:
  PagedLayerKv(PagedSequence* seq, int32_t layer) : seq_(seq), layer_(layer) {}

  kernels::KvRowFormat kv_format() const override;
  kernels::KvRowFormat index_format() const override;
  void read_window(int64_t first, int64_t count, float* out) const override;
  void write_window(int64_t first, int64_t count, const float* rows) override;
  int64_t num_entries() const override { return entries_; }
  void read_entries(std::span<const int32_t> ids, float* out) const override;
  void append_entries(const float* rows, int64_t count) override;
  int64_t num_index_keys() const override { return index_keys_; }
  void read_index_keys(int64_t first, int64_t count, float* out) const override;
  void append_index_keys(const float* rows, int64_t count) override;
  // Counts only: the rows beyond stay in their pages and are written over later.
  void truncate_entries(int64_t count) override { entries_ = count; }
  void truncate_index_keys(int64_t count) override { index_keys_ = count; }
  dsv4::CompressorState& compressor(dsv4::CompressorKind kind) override {
    return kind == dsv4::CompressorKind::kMain ? main_ : index_;
  }
  int64_t boundary_interval() const override;
  void save_boundary(dsv4::CompressorKind kind, int64_t end,
                     const dsv4::CompressorState& state) override;

 private:
  friend class PagedSequence;
  // Address of row `row` of `item` for the item's block `block`.
  uint8_t* item_row(const KvItem& item, int64_t block, int64_t row, int64_t row_bytes) const;

  PagedSequence* seq_;
  int32_t layer_;
  int64_t entries_ = 0, index_keys_ = 0;
  dsv4::CompressorState main_, index_;
};

class PagedSequence final : public dsv4::SequenceKv {
 public:
  PagedSequence(const dsv4::Config& config, const KvLayout& layout, PagePool& pool);
  PagedSequence(const PagedSequence&) = delete;
  PagedSequence& operator=(const PagedSequence&) = delete;

  int64_t length() const override { return length_; }
  int64_t num_layers() const override { return static_cast<int64_t>(layers_.size()); }
  dsv4::LayerKv& layer(int64_t i) override { return layers_[static_cast<size_t>(i)]; }
  void advance(int64_t n) override { length_ += n; }
  void truncate(int64_t length) override { length_ = length; }

  const KvLayout& layout() const { return *layout_; }
  PagePool& pool() const { return *pool_; }

  // Block table: num_blocks() x pages_per_block() page ids, -1 where no page is held.
  int64_t num_blocks() const {
    return static_cast<int64_t>(pages_.size()) / layout_->pages_per_block();
  }
  int32_t& page(int64_t block, int32_t slot) {
    return pages_[static_cast<size_t>(block * layout_->pages_per_block() + slot)];
  }
  int32_t page(int64_t block, int32_t slot) const {
    return pages_[static_cast<size_t>(block * layout_->pages_per_block() + slot)];
  }
  void add_block() { pages_.resize(pages_.size() + layout_->pages_per_block(), -1); }

  // Sets the state to "the first `blocks` blocks are computed" once their pages are in the
  // table: length, entry counts, and the overlap compressors from block blocks-1's
  // boundary state. The sequence must be empty.
  void resume_at(int64_t blocks);
  // Copies length, entry counts and compressors (not pages) from `other`.
  void copy_state(const PagedSequence& other);

 private:
  const KvLayout* layout_;
  PagePool* pool_;
  int64_t length_ = 0;
  std::vector<int32_t> pages_;
  std::vector<PagedLayerKv> layers_;
};

}  // namespace flint::kv
