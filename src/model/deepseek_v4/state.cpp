#include "model/deepseek_v4/state.h"

#include <cstring>
#include <limits>

#include "base/check.h"

namespace flint::dsv4 {

using kernels::KvDtype;
using kernels::KvRowFormat;

void CompressorState::reset(int64_t ratio_, int64_t width_, bool overlap) {
  ratio = ratio_;
  width = width_;
  size_t n = static_cast<size_t>(ratio * width);
  kv.assign(n, 0.0f);
  score.assign(n, -std::numeric_limits<float>::infinity());
  if (overlap) {
    prev_kv.assign(n, 0.0f);
    prev_score.assign(n, -std::numeric_limits<float>::infinity());
  } else {
    prev_kv.clear();
    prev_score.clear();
  }
}

KvRowFormat kv_row_format(const Config& c, KvDtype dtype) {
  return {dtype, c.head_dim, dtype == KvDtype::kFp8 ? c.qk_rope_head_dim : 0};
}

KvRowFormat index_row_format(const Config& c, KvDtype dtype) {
  return {dtype == KvDtype::kFp8 ? KvDtype::kBf16 : dtype, c.index_head_dim, 0};
}

void reset_compressors(const Config& c, int64_t layer, CompressorState& main,
                       CompressorState& index) {
  const int64_t ratio = c.compress_ratio(layer);
  main = {};
  index = {};
  if (ratio > 0) {
    const bool overlap = ratio == 4;
    main.reset(ratio, (overlap ? 2 : 1) * c.head_dim, overlap);
    if (ratio == 4) index.reset(ratio, 2 * c.index_head_dim, true);
  }
}

ContiguousLayerKv::ContiguousLayerKv(const Config& c, int64_t layer, KvDtype dtype,
                                     int64_t extra_window)
    : kv_format_(kv_row_format(c, dtype)),
      index_format_(index_row_format(c, dtype)),
      window_size_(c.sliding_window + extra_window) {
  window_.assign(static_cast<size_t>(window_size_ * c.head_dim), 0.0f);
  reset_compressors(c, layer, compressor_, index_compressor_);
}

void ContiguousLayerKv::read_window(int64_t first, int64_t count, float* out) const {
  const int64_t d = kv_format_.dim;
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(out + i * d, &window_[static_cast<size_t>(((first + i) % window_size_) * d)],
                static_cast<size_t>(d) * sizeof(float));
  }
}

void ContiguousLayerKv::write_window(int64_t first, int64_t count, const float* rows) {
  const int64_t d = kv_format_.dim;
  for (int64_t i = std::max<int64_t>(0, count - window_size_); i < count; ++i) {
    std::memcpy(&window_[static_cast<size_t>(((first + i) % window_size_) * d)], rows + i * d,
                static_cast<size_t>(d) * sizeof(float));
  }
}

int64_t ContiguousLayerKv::num_entries() const {
  return static_cast<int64_t>(entries_.size()) / kv_format_.dim;
}

void ContiguousLayerKv::read_entries(std::span<const int32_t> ids, float* out) const {
  const int64_t d = kv_format_.dim;
  for (size_t i = 0; i < ids.size(); ++i) {
    FLINT_DCHECK(ids[i] >= 0 && ids[i] < num_entries());
    std::memcpy(out + static_cast<int64_t>(i) * d, &entries_[static_cast<size_t>(ids[i] * d)],
                static_cast<size_t>(d) * sizeof(float));
  }
}

void ContiguousLayerKv::append_entries(const float* rows, int64_t count) {
  entries_.insert(entries_.end(), rows, rows + count * kv_format_.dim);
}

void ContiguousLayerKv::read_index_keys(int64_t first, int64_t count, float* out) const {
  const int64_t d = index_format_.dim;
  if (count == 0) return;
  std::memcpy(out, &index_keys_[static_cast<size_t>(first * d)],
              static_cast<size_t>(count * d) * sizeof(float));
}

void ContiguousLayerKv::append_index_keys(const float* rows, int64_t count) {
  index_keys_.insert(index_keys_.end(), rows, rows + count * index_format_.dim);
}

void ContiguousLayerKv::truncate_entries(int64_t count) {
  FLINT_CHECK(count >= 0 && count <= num_entries());
  entries_.resize(static_cast<size_t>(count * kv_format_.dim));
}

void ContiguousLayerKv::truncate_index_keys(int64_t count) {
  FLINT_CHECK(count >= 0 && count * index_format_.dim <= static_cast<int64_t>(index_keys_.size()));
  index_keys_.resize(static_cast<size_t>(count * index_format_.dim));
}

SequenceState::SequenceState(const Config& c, KvDtype dtype, int64_t extra_window) {
  layers_.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_.emplace_back(c, i, dtype, extra_window);
}

SequenceState::SequenceState(const Config& c, std::span<const int64_t> layer_ids, KvDtype dtype,
                             int64_t extra_window) {
  layers_.reserve(layer_ids.size());
  for (int64_t id : layer_ids) layers_.emplace_back(c, id, dtype, extra_window);
}

void SequenceState::truncate(int64_t length) {
  FLINT_CHECK(length >= 0 && length <= length_);
  length_ = length;
}

}  // namespace flint::dsv4
