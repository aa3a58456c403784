// The paged KV store against the contiguous one, and the prefix cache against cold
// computation: bit for bit, through the real model (tiny preset: window 128, ratio-4 and
// ratio-128 layers, blocks of 128 tokens).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "engine_test_util.h"
#include "kv/kv_cache.h"

namespace flint::engine {
namespace {

using kernels::KvDtype;
using testutil::random_tokens;
using testutil::tiny_model;

kv::KvCacheOptions options(KvDtype dtype, int64_t pages = 2000) {
  kv::KvCacheOptions o;
  o.block_size = 128;
  o.dtype = dtype;
  o.num_pages = pages;
  return o;
}

// Feeds tokens[from, to) in chunks of `chunk` through the paged store; all logits rows.
std::vector<float> feed(kv::KvCache& cache, kv::KvCache::SeqId id,
                        const std::vector<int32_t>& tokens, int64_t from, int64_t to,
                        int64_t chunk, bool all_logits = true) {
  std::vector<float> all;
  for (int64_t b = from; b < to; b += chunk) {
    const int64_t n = std::min(chunk, to - b);
    EXPECT_TRUE(cache.reserve(id, n));
    dsv4::ForwardRequest req{&cache.sequence(id),
                             std::span<const int32_t>(tokens).subspan(static_cast<size_t>(b),
                                                                      static_cast<size_t>(n)),
                             all_logits};
    auto part = tiny_model().forward({&req, 1}, QuantSimulation::kOfficial);
    all.insert(all.end(), part.begin(), part.end());
    cache.commit(id, std::span<const int32_t>(tokens).first(static_cast<size_t>(b + n)));
  }
  return all;
}

std::vector<float> contiguous(const std::vector<int32_t>& tokens, KvDtype dtype) {
  dsv4::SequenceState s = tiny_model().new_sequence(dtype);
  dsv4::ForwardRequest req{&s, tokens, true};
  return tiny_model().forward({&req, 1}, QuantSimulation::kOfficial);
}

int64_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t n = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    n += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]);
  return n;
}

TEST(PagedKv, EqualsContiguousBitForBit) {
  auto tokens = random_tokens(300, 21);
  for (KvDtype d : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kFp8}) {
    if (flint::testing::kSanitized && d != KvDtype::kFp8) continue;  // the codec with most code
    kv::KvCache cache(tiny_model().config(), options(d));
    auto id = cache.open();
    // Chunks of 97 cross block (128, 256), window and ratio-128 boundaries mid-chunk.
    auto paged = feed(cache, id, tokens, 0, 300, 97);
    EXPECT_EQ(differing_bits(paged, contiguous(tokens, d)), 0) << kernels::kv_dtype_name(d);
  }
}

TEST(PagedKv, Fp8StaysCloseToFloat32) {
  if (flint::testing::kSanitized) GTEST_SKIP() << "numbers only; the main build runs it";
  auto tokens = random_tokens(300, 22);
  const int64_t V = tiny_model().config().vocab_size;
  auto f32 = contiguous(tokens, KvDtype::kF32);
  auto fp8 = contiguous(tokens, KvDtype::kFp8);
  double mean = 0;
  int64_t same_argmax = 0;
  for (size_t i = 0; i < f32.size(); ++i) mean += std::fabs(f32[i] - fp8[i]);
  mean /= double(f32.size());
  for (int64_t t = 0; t < 300; ++t) {
    std::span<const float> a(f32.data() + t * V, static_cast<size_t>(V));
    std::span<const float> b(fp8.data() + t * V, static_cast<size_t>(V));
    same_argmax += argmax(a) == argmax(b);
  }
  // Under --quant-simulation official the nope dims are FP8 already, so fp8 storage only
  // rounds the rope dims to bf16 (bf16 storage gives the same numbers, test above: bf16
  // holds FP8 values exactly). Measured on this prompt: mean |difference| 0.019, less than
  // the quantisation simulation itself moves the logits (0.036); isolated positions move
  // by up to ~1.4 where a routing choice of the random tiny model flips.
  // (The same comparison with bf16 storage gives identical logits to fp8: checked below.)
  EXPECT_GT(mean, 0.0);
  EXPECT_LT(mean, 0.03);
  EXPECT_GE(same_argmax, 285);  // of 300 positions (measured 290: the random model's
                                // logits are flat, so near-ties flip)
  EXPECT_EQ(differing_bits(fp8, contiguous(tokens, KvDtype::kBf16)), 0);
  RecordProperty("fp8_vs_f32_mean_abs", std::to_string(mean));
  RecordProperty("same_argmax_of_300", std::to_string(same_argmax));
}

TEST(PrefixCache, HitEqualsColdBitForBit) {
  auto prompt = random_tokens(300, 23);
  kv::KvCache cache(tiny_model().config(), options(KvDtype::kFp8));
  auto cold_id = cache.open();
  auto cold = feed(cache, cold_id, prompt, 0, 300, 300);
  cache.close(cold_id);

  auto hit_id = cache.open();
  ASSERT_EQ(cache.restore_prefix(hit_id, prompt), 256);  // two whole blocks
  auto warm = feed(cache, hit_id, prompt, 256, 300, 300);
  const int64_t V = tiny_model().config().vocab_size;
  std::vector<float> tail(cold.begin() + 256 * V, cold.end());
  EXPECT_EQ(differing_bits(warm, tail), 0);
  auto stats = cache.stats();
  EXPECT_EQ(stats.prefix_queries, 300);  // the cold sequence did not look
  EXPECT_EQ(stats.prefix_hits, 256);

  // A longer prompt sharing the first 300 tokens finds the same two blocks; a different
  // salt finds nothing.
  auto longer = prompt;
  auto extra = random_tokens(200, 24);
  longer.insert(longer.end(), extra.begin(), extra.end());
  auto other = cache.open();
  EXPECT_EQ(cache.restore_prefix(other, longer), 256);
  auto salted = cache.open("tenant-b");
  EXPECT_EQ(cache.restore_prefix(salted, prompt), 0);
}

TEST(PrefixCache, WholePromptCachedStillComputesItsLastBlock) {
  auto prompt = random_tokens(256, 25);
  kv::KvCache cache(tiny_model().config(), options(KvDtype::kFp8));
  auto a = cache.open();
  auto cold = feed(cache, a, prompt, 0, 256, 256);
  cache.close(a);
  auto b = cache.open();
  // Logits of the last token need a computed row: the last block is recomputed.
  EXPECT_EQ(cache.restore_prefix(b, prompt), 128);
  auto warm = feed(cache, b, prompt, 128, 256, 128);
  const int64_t V = tiny_model().config().vocab_size;
  EXPECT_EQ(differing_bits(warm, std::vector<float>(cold.begin() + 128 * V, cold.end())), 0);
}

TEST(PagedKv, ForkContinuesLikeTheParent) {
  auto prompt = random_tokens(200, 26);
  kv::KvCache cache(tiny_model().config(), options(KvDtype::kFp8));
  auto parent = cache.open();
  feed(cache, parent, prompt, 0, 200, 200);
  const int64_t before = cache.num_free_pages();
  auto child = cache.fork(parent);
  ASSERT_TRUE(child.has_value());
  // Block 0 is shared; only the partial block 1 was copied.
  EXPECT_EQ(before - cache.num_free_pages(), cache.layout().pages_per_block());
  auto next = prompt;
  next.push_back(777);
  auto a = feed(cache, parent, next, 200, 201, 1);
  auto b = feed(cache, *child, next, 200, 201, 1);
  EXPECT_EQ(differing_bits(a, b), 0);
  next.push_back(4242);
  auto c = contiguous(next, KvDtype::kFp8);
  auto d = feed(cache, *child, next, 201, 202, 1);
  const int64_t V = tiny_model().config().vocab_size;
  EXPECT_EQ(differing_bits(d, std::vector<float>(c.end() - V, c.end())), 0);
}

TEST(PagedKv, WindowPagesReturnToThePool) {
  auto tokens = random_tokens(1000, 27);
  kv::KvCacheOptions o = options(KvDtype::kFp8);
  o.prefix_caching = false;
  kv::KvCache cache(tiny_model().config(), o);
  auto id = cache.open();
  feed(cache, id, tokens, 0, 1000, 256, false);
  const auto& l = cache.layout();
  // 8 blocks of history, the window of the last 2 blocks only.
  EXPECT_EQ(o.num_pages - cache.num_free_pages(), 8 * l.history_pages + 2 * l.num_layers);
  cache.close(id);
  EXPECT_EQ(cache.num_free_pages(), o.num_pages);
}

}  // namespace
}  // namespace flint::engine
