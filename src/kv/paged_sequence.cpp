#include "kv/paged_sequence.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "model/deepseek_v4/state.h"

namespace flint::kv {

using kernels::KvRowFormat;

PagedSequence::PagedSequence(const dsv4::Config& config, const KvLayout& layout, PagePool& pool)
    : layout_(&layout), pool_(&pool) {
  layers_.reserve(static_cast<size_t>(layout.num_layers));
  for (int32_t i = 0; i < layout.num_layers; ++i) {
    layers_.emplace_back(this, i);
    dsv4::reset_compressors(config, i, layers_.back().main_, layers_.back().index_);
  }
}

void PagedSequence::resume_at(int64_t blocks) {
  FLINT_CHECK(length_ == 0 && blocks <= num_blocks());
  length_ = blocks * layout_->block_size;
  for (PagedLayerKv& l : layers_) {
    const LayerLayout& ll = layout_->layers[static_cast<size_t>(l.layer_)];
    l.entries_ = ll.ratio > 0 ? length_ / ll.ratio : 0;
    l.index_keys_ = ll.ratio == 4 ? length_ / 4 : 0;
    if (blocks == 0 || ll.boundary.slot < 0) continue;
    // The overlap compressors' previous block, as saved when block blocks-1 completed. The
    // current block's rows need no restoring: a block boundary is a compressor boundary,
    // so they are all written before the next entry is pooled.
    const float* src = reinterpret_cast<const float*>(l.item_row(ll.boundary, blocks - 1, 0, 0));
    for (dsv4::CompressorState* s : {&l.main_, &l.index_}) {
      const size_t n = s->prev_kv.size();
      std::memcpy(s->prev_kv.data(), src, n * sizeof(float));
      std::memcpy(s->prev_score.data(), src + n, n * sizeof(float));
      s->kv = s->prev_kv;
      s->score = s->prev_score;
      src += 2 * n;
    }
  }
}

void PagedSequence::copy_state(const PagedSequence& other) {
  length_ = other.length_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].entries_ = other.layers_[i].entries_;
    layers_[i].index_keys_ = other.layers_[i].index_keys_;
    layers_[i].main_ = other.layers_[i].main_;
    layers_[i].index_ = other.layers_[i].index_;
  }
}

KvRowFormat PagedLayerKv::kv_format() const { return seq_->layout().kv_format; }
KvRowFormat PagedLayerKv::index_format() const { return seq_->layout().index_format; }
int64_t PagedLayerKv::boundary_interval() const { return seq_->layout().block_size; }

uint8_t* PagedLayerKv::item_row(const KvItem& item, int64_t block, int64_t row,
                                int64_t row_bytes) const {
  FLINT_DCHECK(item.slot >= 0 && block < seq_->num_blocks());
  const int32_t page = seq_->page(block, item.slot);
  FLINT_CHECK(page >= 0, "layer {}: block {} slot {} has no page", layer_, block, item.slot);
  return seq_->pool().data(page) + item.offset + row * row_bytes;
}

void PagedLayerKv::read_window(int64_t first, int64_t count, float* out) const {
  const KvLayout& l = seq_->layout();
  const KvItem item{l.layers[static_cast<size_t>(layer_)].window_slot, 0, l.page_bytes};
  const int64_t rb = l.kv_format.bytes();
  // Rows of one block are contiguous: decode each block's run in one call.
  for (int64_t pos = first, end = first + count; pos < end;) {
    const int64_t row = pos % l.block_size, n = std::min(end - pos, l.block_size - row);
    kernels::decode_kv_rows(l.kv_format, item_row(item, pos / l.block_size, row, rb), n,
                            out + (pos - first) * l.kv_format.dim);
    pos += n;
  }
}

void PagedLayerKv::write_window(int64_t first, int64_t count, const float* rows) {
  const KvLayout& l = seq_->layout();
  const KvItem item{l.layers[static_cast<size_t>(layer_)].window_slot, 0, l.page_bytes};
  const int64_t rb = l.kv_format.bytes();
  for (int64_t pos = first; pos < first + count; ++pos) {
    kernels::encode_kv_rows(l.kv_format, rows + (pos - first) * l.kv_format.dim, 1,
                            item_row(item, pos / l.block_size, pos % l.block_size, rb));
  }
}

void PagedLayerKv::read_entries(std::span<const int32_t> ids, float* out) const {
  if (ids.empty()) return;  // also on window-only layers, which have no entries
  const KvLayout& l = seq_->layout();
  const LayerLayout& ll = l.layers[static_cast<size_t>(layer_)];
  const int64_t per_block = l.block_size / ll.ratio, rb = l.kv_format.bytes();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t e = ids[i];
    FLINT_DCHECK(e >= 0 && e < entries_);
    kernels::decode_kv_rows(l.kv_format, item_row(ll.entries, e / per_block, e % per_block, rb), 1,
                            out + static_cast<int64_t>(i) * l.kv_format.dim);
  }
}

void PagedLayerKv::append_entries(const float* rows, int64_t count) {
  const KvLayout& l = seq_->layout();
  const LayerLayout& ll = l.layers[static_cast<size_t>(layer_)];
  const int64_t per_block = l.block_size / ll.ratio, rb = l.kv_format.bytes();
  for (int64_t i = 0; i < count; ++i, ++entries_) {
    kernels::encode_kv_rows(l.kv_format, rows + i * l.kv_format.dim, 1,
                            item_row(ll.entries, entries_ / per_block, entries_ % per_block, rb));
  }
}

void PagedLayerKv::read_index_keys(int64_t first, int64_t count, float* out) const {
  const KvLayout& l = seq_->layout();
  const LayerLayout& ll = l.layers[static_cast<size_t>(layer_)];
  const int64_t per_block = l.block_size / 4, rb = l.index_format.bytes();
  for (int64_t k = first; k < first + count; ++k) {
    kernels::decode_kv_rows(l.index_format,
                            item_row(ll.index_keys, k / per_block, k % per_block, rb), 1,
                            out + (k - first) * l.index_format.dim);
  }
}

void PagedLayerKv::append_index_keys(const float* rows, int64_t count) {
  const KvLayout& l = seq_->layout();
  const LayerLayout& ll = l.layers[static_cast<size_t>(layer_)];
  const int64_t per_block = l.block_size / 4, rb = l.index_format.bytes();
  for (int64_t i = 0; i < count; ++i, ++index_keys_) {
    kernels::encode_kv_rows(
        l.index_format, rows + i * l.index_format.dim, 1,
        item_row(ll.index_keys, index_keys_ / per_block, index_keys_ % per_block, rb));
  }
}

void PagedLayerKv::save_boundary(dsv4::CompressorKind kind, int64_t end,
                                 const dsv4::CompressorState& s) {
  const KvLayout& l = seq_->layout();
  const LayerLayout& ll = l.layers[static_cast<size_t>(layer_)];
  if (ll.boundary.slot < 0 || !s.overlap()) return;
  float* dst = reinterpret_cast<float*>(item_row(ll.boundary, end / l.block_size - 1, 0, 0));
  if (kind == dsv4::CompressorKind::kIndex) dst += 2 * ll.boundary_main_floats;
  const size_t n = s.prev_kv.size();
  FLINT_CHECK(static_cast<int64_t>(n) ==
              (kind == dsv4::CompressorKind::kMain ? ll.boundary_main_floats
                                                   : ll.boundary_index_floats));
  std::memcpy(dst, s.prev_kv.data(), n * sizeof(float));
  std::memcpy(dst + n, s.prev_score.data(), n * sizeof(float));
}

}  // namespace flint::kv
