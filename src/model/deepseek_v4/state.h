// The contiguous per-sequence store (kv_store.h): everything one sequence needs to continue
// from where its last forward call stopped, in vectors it owns. Used by tests, tools and
// drafts; the engine uses the paged store instead. Prefill of many tokens, chunked prefill
// and one-token decoding read and extend the same state, so they give the same logits.
//
// Per layer: the sliding-window ring of KV rows, the compressed KV entries, the indexer's
// compressed keys, and each compressor's pending block. Memory grows with the sequence:
// entries are appended as blocks of `ratio` tokens complete.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/deepseek_v4/compressor_state.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/kv_store.h"

namespace flint::dsv4 {

class ContiguousLayerKv final : public LayerKv {
 public:
  // `extra_window`: ring rows beyond sliding_window, so that up to that many positions
  // written speculatively and rolled back never overwrite a row the window still needs.
  ContiguousLayerKv(const Config& c, int64_t layer, kernels::KvDtype dtype,
                    int64_t extra_window = 0);

  kernels::KvRowFormat kv_format() const override { return kv_format_; }
  kernels::KvRowFormat index_format() const override { return index_format_; }
  void read_window(int64_t first, int64_t count, float* out) const override;
  void write_window(int64_t first, int64_t count, const float* rows) override;
  int64_t num_entries() const override;
  void read_entries(std::span<const int32_t> ids, float* out) const override;
  void append_entries(const float* rows, int64_t count) override;
  int64_t num_index_keys() const override {
    return static_cast<int64_t>(index_keys_.size()) / index_format_.dim;
  }
  void read_index_keys(int64_t first, int64_t count, float* out) const override;
  void append_index_keys(const float* rows, int64_t count) override;
  void truncate_entries(int64_t count) override;
  void truncate_index_keys(int64_t count) override;
  CompressorState& compressor(CompressorKind kind) override {
    return kind == CompressorKind::kMain ? compressor_ : index_compressor_;
  }

 private:
  kernels::KvRowFormat kv_format_, index_format_;
  int64_t window_size_;
  std::vector<float> window_;   // [sliding_window, head_dim], row = position % sliding_window
  std::vector<float> entries_;  // [n_entries, head_dim]
  std::vector<float> index_keys_;  // [n_entries, index_head_dim] (ratio-4 layers)
  CompressorState compressor_, index_compressor_;
};

class SequenceState final : public SequenceKv {
 public:
  // A fresh state for the target's layers. dtype: the rounding applied to stored rows
  // (float32: none); extra_window: see ContiguousLayerKv.
  explicit SequenceState(const Config& c, kernels::KvDtype dtype = kernels::KvDtype::kF32,
                         int64_t extra_window = 0);
  // A state for the given layers (config layer ids: a draft's stages follow the target's).
  SequenceState(const Config& c, std::span<const int64_t> layer_ids, kernels::KvDtype dtype,
                int64_t extra_window);

  int64_t length() const override { return length_; }
  int64_t num_layers() const override { return static_cast<int64_t>(layers_.size()); }
  LayerKv& layer(int64_t i) override { return layers_[static_cast<size_t>(i)]; }
  void advance(int64_t n) override { length_ += n; }
  void truncate(int64_t length) override;

 private:
  int64_t length_ = 0;
  std::vector<ContiguousLayerKv> layers_;
};

// The formats of a layer's rows: KV rows of head_dim (rope dims last), indexer keys of
// index_head_dim (FP8 storage keeps them in bf16: they are FP4-rounded, exact in bf16).
kernels::KvRowFormat kv_row_format(const Config& c, kernels::KvDtype dtype);
kernels::KvRowFormat index_row_format(const Config& c, kernels::KvDtype dtype);
// Resets a layer's compressors to their state before the first token.
void reset_compressors(const Config& c, int64_t layer, CompressorState& main,
                       CompressorState& index);

}  // namespace flint::dsv4
