// The paged layout table, without kernels: every item fits its page, items never overlap,
// every layer kind gets what it needs, and sizes match the formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "base/error.h"
#include "kv/kv_layout.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

namespace flint::kv {
namespace {

void expect_consistent(const KvLayout& l, const dsv4::Config& c) {
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> used;  // slot -> [begin, end)
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const LayerLayout& ll = l.layers[static_cast<size_t>(i)];
    EXPECT_EQ(ll.ratio, c.compress_ratio(i));
    EXPECT_EQ(ll.window_slot, l.history_pages + i);
    EXPECT_EQ(ll.entries.slot >= 0, ll.ratio > 0) << "layer " << i;
    EXPECT_EQ(ll.index_keys.slot >= 0, ll.ratio == 4) << "layer " << i;
    EXPECT_EQ(ll.boundary.slot >= 0, ll.ratio == 4) << "layer " << i;
    if (ll.ratio > 0) {
      EXPECT_GE(ll.entries.bytes, l.block_size / ll.ratio * l.kv_format.bytes());
    }
    if (ll.ratio == 4) {
      EXPECT_GE(ll.index_keys.bytes, l.block_size / 4 * l.index_format.bytes());
      EXPECT_GE(ll.boundary.bytes, 4 * 2 * (2 * c.head_dim + 2 * c.index_head_dim) * 4);
    }
    for (const KvItem* it : {&ll.entries, &ll.index_keys, &ll.boundary}) {
      if (it->slot < 0) continue;
      EXPECT_LT(it->slot, l.history_pages);
      EXPECT_LE(it->offset + it->bytes, l.page_bytes);
      EXPECT_EQ(it->offset % 64, 0);
      used[it->slot].push_back({it->offset, it->offset + it->bytes});
    }
  }
  for (auto& [slot, ranges] : used) {
    std::sort(ranges.begin(), ranges.end());
    for (size_t k = 1; k < ranges.size(); ++k)
      EXPECT_LE(ranges[k - 1].second, ranges[k].first) << "overlap in slot " << slot;
  }
  EXPECT_GE(l.page_bytes, l.block_size * l.kv_format.bytes());
}

TEST(KvLayout, EveryPresetAndDtype) {
  for (const char* preset : {"tiny", "tiny-dspark", "bench"}) {
    dsv4::Config c = dsv4::tiny_preset(preset);
    for (auto d : {kernels::KvDtype::kF32, kernels::KvDtype::kBf16, kernels::KvDtype::kFp8}) {
      for (int64_t bs : {128, 256, 512}) {
        KvLayout l = make_kv_layout(c, bs, d);
        SCOPED_TRACE(::testing::Message() << preset << " " << kernels::kv_dtype_name(d) << " " << bs);
        expect_consistent(l, c);
      }
    }
  }
}

TEST(KvLayout, WindowBlocksAndPages) {
  dsv4::Config c = dsv4::tiny_preset("tiny");  // window 128
  KvLayout l = make_kv_layout(c, 128, kernels::KvDtype::kFp8);
  EXPECT_EQ(l.window_blocks(), 2);  // 127 earlier positions reach into the previous block
  EXPECT_EQ(l.pages_for_tokens(1), l.history_pages + l.num_layers);
  EXPECT_EQ(l.pages_for_tokens(1000), 8 * l.history_pages + 2 * l.num_layers);
  KvLayout big = make_kv_layout(c, 256, kernels::KvDtype::kFp8);
  EXPECT_EQ(big.window_blocks(), 2);
}

TEST(KvLayout, Fp8HalvesTheRows) {
  dsv4::Config c = dsv4::tiny_preset("tiny");
  KvLayout f = make_kv_layout(c, 256, kernels::KvDtype::kFp8);
  KvLayout b = make_kv_layout(c, 256, kernels::KvDtype::kBf16);
  const double ratio = f.window_bytes_per_token() / b.window_bytes_per_token();
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 0.65);
}

TEST(KvLayout, BlockSizeMustHoldWholeEntries) {
  dsv4::Config c = dsv4::tiny_preset("tiny");
  EXPECT_THROW(make_kv_layout(c, 64, kernels::KvDtype::kFp8), Error);
  EXPECT_THROW(make_kv_layout(c, 0, kernels::KvDtype::kFp8), Error);
  try {
    make_kv_layout(c, 192, kernels::KvDtype::kFp8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--block-size 192"), std::string::npos) << e.what();
  }
}

TEST(KvLayout, IdentityChangesWithTheLayout) {
  dsv4::Config c = dsv4::tiny_preset("tiny");
  auto a = make_kv_layout(c, 256, kernels::KvDtype::kFp8).identity(1);
  EXPECT_EQ(a, make_kv_layout(c, 256, kernels::KvDtype::kFp8).identity(1));
  EXPECT_NE(a, make_kv_layout(c, 128, kernels::KvDtype::kFp8).identity(1));
  EXPECT_NE(a, make_kv_layout(c, 256, kernels::KvDtype::kBf16).identity(1));
  EXPECT_NE(a, make_kv_layout(c, 256, kernels::KvDtype::kFp8).identity(2));
}

}  // namespace
}  // namespace flint::kv
