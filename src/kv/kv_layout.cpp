#include "kv/kv_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"
#include "base/hash.h"
#include "model/deepseek_v4/state.h"

namespace flint::kv {

namespace {
int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }
}  // namespace

KvLayout make_kv_layout(const dsv4::Config& c, int64_t block_size, kernels::KvDtype dtype) {
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const int64_t r = c.compress_ratio(i);
    if (block_size <= 0 || (r > 0 && block_size % r != 0)) {
      throw Error(
          "--block-size {}: must be a positive multiple of every compression ratio (layer {} "
          "compresses by {})",
          block_size, i, r);
    }
  }
  KvLayout l;
  l.block_size = block_size;
  l.sliding_window = c.sliding_window;
  l.kv_format = dsv4::kv_row_format(c, dtype);
  l.index_format = dsv4::index_row_format(c, dtype);
  l.num_layers = static_cast<int32_t>(c.num_hidden_layers);
  l.layers.resize(static_cast<size_t>(c.num_hidden_layers));

  // Item sizes first; the page is the largest item.
  std::vector<KvItem*> items;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LayerLayout& ll = l.layers[static_cast<size_t>(i)];
    ll.ratio = c.compress_ratio(i);
    if (ll.ratio > 0) {
      ll.entries.bytes = align64(block_size / ll.ratio * l.kv_format.bytes());
      items.push_back(&ll.entries);
    }
    if (ll.ratio == 4) {  // overlapping compressors and the indexer
      ll.index_keys.bytes = align64(block_size / 4 * l.index_format.bytes());
      ll.boundary_main_floats = 4 * 2 * c.head_dim;
      ll.boundary_index_floats = 4 * 2 * c.index_head_dim;
      ll.boundary.bytes =
          align64(2 * (ll.boundary_main_floats + ll.boundary_index_floats) * int64_t{4});
      items.push_back(&ll.index_keys);
      items.push_back(&ll.boundary);
    }
  }
  l.page_bytes = align64(block_size * l.kv_format.bytes());
  for (const KvItem* it : items) l.page_bytes = std::max(l.page_bytes, it->bytes);

  // First-fit packing of the history items, largest first, into as few pages as possible.
  std::vector<KvItem*> order = items;
  std::stable_sort(order.begin(), order.end(),
                   [](const KvItem* a, const KvItem* b) { return a->bytes > b->bytes; });
  std::vector<int64_t> used;
  for (KvItem* it : order) {
    size_t page = 0;
    while (page < used.size() && used[page] + it->bytes > l.page_bytes) ++page;
    if (page == used.size()) used.push_back(0);
    it->slot = static_cast<int32_t>(page);
    it->offset = used[page];
    used[page] += it->bytes;
  }
  l.history_pages = static_cast<int32_t>(used.size());
  for (int32_t i = 0; i < l.num_layers; ++i)
    l.layers[static_cast<size_t>(i)].window_slot = l.history_pages + i;
  return l;
}

int64_t KvLayout::pages_for_tokens(int64_t tokens) const {
  const int64_t blocks = (tokens + block_size - 1) / block_size;
  return blocks * history_pages + std::min(blocks, window_blocks()) * num_layers;
}

double KvLayout::window_bytes_per_token() const {
  return static_cast<double>(num_layers) * static_cast<double>(kv_format.bytes());
}

double KvLayout::compressed_bytes_per_token() const {
  double b = 0;
  for (const LayerLayout& ll : layers) {
    if (ll.ratio > 0) b += static_cast<double>(kv_format.bytes()) / static_cast<double>(ll.ratio);
    if (ll.ratio == 4) {
      b += static_cast<double>(index_format.bytes()) / 4.0;
      b += static_cast<double>(ll.boundary.bytes) / static_cast<double>(block_size);
    }
  }
  return b;
}

uint64_t KvLayout::identity(uint64_t model_identity) const {
  std::vector<int64_t> v = {block_size,          sliding_window,
                            page_bytes,          history_pages,
                            num_layers,          static_cast<int64_t>(kv_format.dtype),
                            kv_format.dim,       kv_format.rope_dim,
                            index_format.dim,    static_cast<int64_t>(index_format.dtype)};
  for (const LayerLayout& ll : layers) {
    for (const KvItem* it : {&ll.entries, &ll.index_keys, &ll.boundary}) {
      v.push_back(it->slot);
      v.push_back(it->offset);
      v.push_back(it->bytes);
    }
  }
  return hash64(v.data(), v.size() * sizeof(int64_t), model_identity);
}

std::string KvLayout::describe() const {
  return fmt::format(
      "blocks of {} tokens, {} pages of {} KiB each ({} for compressed entries, indexer keys "
      "and boundary state, {} for the window of each layer), KV rows {} ({} bytes), indexer "
      "keys {} ({} bytes)",
      block_size, pages_per_block(), page_bytes / 1024, history_pages, num_layers,
      kernels::kv_dtype_name(kv_format.dtype), kv_format.bytes(),
      kernels::kv_dtype_name(index_format.dtype), index_format.bytes());
}

}  // namespace flint::kv
