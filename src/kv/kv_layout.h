// Where each part of DeepSeek-V4's attention cache goes in the paged pool.
//
// The pool is one arena of equal pages. A sequence's tokens are grouped in blocks of
// `block_size` tokens (a multiple of 128, the largest compression ratio, so a block holds
// whole compressed entries and every compressor is between blocks at a block boundary).
// Each block owns pages_per_block() page slots:
//   - history slots [0, history_pages): the compressed entries (ratio 4 and 128), the
//     indexer keys (ratio-4 layers) and the boundary state (the overlap compressors'
//     previous block, float32, saved when the block completes) of every layer, packed
//     first-fit. Kept for the sequence's whole life.
//   - window slots [history_pages, history_pages + num_layers): one per layer, the block's
//     sliding-window KV rows. Released once the sequence's window has moved past the block.
// The page size is the largest item (a layer's window rows for one block), so every item
// fits a page and one free list serves both kinds. The table is computed once from the
// config and can be tested without kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kv_codec.h"
#include "model/deepseek_v4/config.h"

namespace flint::kv {

struct KvItem {
  int32_t slot = -1;   // page slot within the block; -1: the layer has no such item
  int64_t offset = 0;  // bytes into the page
  int64_t bytes = 0;
};

struct LayerLayout {
  int64_t ratio = 0;  // compression ratio (0: window only)
  KvItem entries;     // block_size / ratio rows of kv_format
  KvItem index_keys;  // block_size / 4 rows of index_format (ratio-4 layers)
  KvItem boundary;    // float32 [main prev_kv, main prev_score, index prev_kv, index prev_score]
  int64_t boundary_main_floats = 0;   // ratio * main width (each of prev_kv, prev_score)
  int64_t boundary_index_floats = 0;  // ratio * index width
  int32_t window_slot = -1;
};

struct KvLayout {
  int64_t block_size = 0;
  int64_t sliding_window = 0;
  kernels::KvRowFormat kv_format, index_format;
  int64_t page_bytes = 0;  // multiple of 64
  int32_t history_pages = 0;
  int32_t num_layers = 0;
  std::vector<LayerLayout> layers;

  int32_t pages_per_block() const { return history_pages + num_layers; }
  // Blocks whose window pages a sequence holds in steady state: the one being written
  // plus those reaching back sliding_window - 1 positions.
  int64_t window_blocks() const { return (sliding_window - 1 + block_size - 1) / block_size + 1; }
  // Pages for a sequence of `tokens` tokens in steady state (history of every block, the
  // window of the last window_blocks()).
  int64_t pages_for_tokens(int64_t tokens) const;
  // Bytes per token actually used, by kind (for the start-up log).
  double window_bytes_per_token() const;      // all layers, for the last sliding_window tokens
  double compressed_bytes_per_token() const;  // entries + indexer keys + boundary state
  // A hash of everything that decides what a page's bytes mean (for the disk tier).
  uint64_t identity(uint64_t model_identity) const;
  std::string describe() const;
};

// Throws flint::Error if block_size is not a positive multiple of every compression ratio.
KvLayout make_kv_layout(const dsv4::Config& config, int64_t block_size, kernels::KvDtype dtype);

}  // namespace flint::kv
