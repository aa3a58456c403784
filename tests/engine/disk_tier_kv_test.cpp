// The KV cache's disk tier with the real model: blocks evicted from the pool come back from
// disk with the logits of a cold prefill, across a restart; damaged files are detected,
// counted and recomputed, never used.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <fstream>

#include "engine_test_util.h"
#include "kv/kv_cache.h"

namespace flint::engine {
namespace {

using testutil::random_tokens;
using testutil::tiny_model;

kv::KvCacheOptions disk_options(const std::filesystem::path& dir) {
  kv::KvCacheOptions o;
  o.block_size = 128;
  o.dtype = kernels::KvDtype::kFp8;
  o.num_pages = 24;  // one 300-token sequence (21 pages) and a little more
  o.disk = kv::DiskTierOptions{dir, int64_t{64} << 20, 0};
  o.model_identity = tiny_model().identity();
  return o;
}

// Last-token logits of tokens[from, n) after restoring what the cache has.
struct Outcome {
  int64_t restored = 0;
  std::vector<float> logits;
};
Outcome run(kv::KvCache& cache, const std::vector<int32_t>& tokens) {
  Outcome r;
  auto id = cache.open();
  r.restored = cache.restore_prefix(id, tokens);
  const int64_t n = static_cast<int64_t>(tokens.size()) - r.restored;
  EXPECT_TRUE(cache.reserve(id, n));
  dsv4::ForwardRequest req{
      &cache.sequence(id),
      std::span<const int32_t>(tokens).subspan(static_cast<size_t>(r.restored)), false};
  r.logits = tiny_model().forward({&req, 1}, QuantSimulation::kOfficial);
  cache.commit(id, tokens);
  cache.close(id);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  return true;
}

TEST(DiskTierKv, EvictedBlocksComeBackAcrossARestart) {
  auto dir = flint::testing::temp_dir("kv-disk");
  auto a = random_tokens(300, 61), b = random_tokens(300, 62);
  std::vector<float> cold;
  {
    kv::KvCache cache(tiny_model().config(), disk_options(dir));
    Outcome first = run(cache, a);
    EXPECT_EQ(first.restored, 0);
    cold = first.logits;
    run(cache, b);  // fills the pool: a's cached pages go to disk
    auto s = cache.stats();
    EXPECT_GT(s.disk_pages_written, 0);
    Outcome again = run(cache, a);
    EXPECT_EQ(again.restored, 256);
    EXPECT_TRUE(same_bits(again.logits, cold));
    s = cache.stats();
    EXPECT_EQ(s.disk_hit_tokens, 256);
    EXPECT_GT(s.disk_pages_read, 0);
  }
  // A new process (a new cache on the same folder) finds them too.
  kv::KvCache cache(tiny_model().config(), disk_options(dir));
  Outcome restarted = run(cache, a);
  EXPECT_EQ(restarted.restored, 256);
  EXPECT_TRUE(same_bits(restarted.logits, cold));
  EXPECT_EQ(cache.stats().disk_hit_tokens, 256);
}

TEST(DiskTierKv, DamagedFilesAreRecomputedNeverUsed) {
  auto dir = flint::testing::temp_dir("kv-disk-bad");
  auto a = random_tokens(300, 63), b = random_tokens(300, 64);
  std::vector<float> cold;
  {
    kv::KvCache cache(tiny_model().config(), disk_options(dir));
    cold = run(cache, a).logits;
    run(cache, b);
    run(cache, random_tokens(300, 65));  // b's pages to disk too, a's for sure
  }
  int damaged = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".kv") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(entry.file_size() - 7));
    f.put('\x5a');
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  kv::KvCache cache(tiny_model().config(), disk_options(dir));
  Outcome again = run(cache, a);
  EXPECT_EQ(again.restored, 0);
  EXPECT_TRUE(same_bits(again.logits, cold));  // recomputed
  auto s = cache.stats();
  EXPECT_GT(s.disk_pages_rejected, 0);
  ASSERT_TRUE(s.disk.has_value());
  EXPECT_GT(s.disk->corrupt, 0);
}

TEST(DiskTierKv, AnotherKvFormatIsForeign) {
  auto dir = flint::testing::temp_dir("kv-disk-foreign");
  auto a = random_tokens(300, 66);
  {
    kv::KvCache cache(tiny_model().config(), disk_options(dir));
    run(cache, a);
    run(cache, random_tokens(300, 67));
  }
  kv::KvCacheOptions o = disk_options(dir);
  o.dtype = kernels::KvDtype::kBf16;  // other bytes per page: the files mean nothing here
  kv::KvCache cache(tiny_model().config(), o);
  EXPECT_EQ(run(cache, a).restored, 0);
}

// Tensor parallelism: only rank 0 has a disk tier; the other ranks replay its journal, which
// carries the pages rank 0 read back. Both ranks' caches then hold the same bytes (the same
// logits, bit for bit, equal to a cold prefill's) and the same pool, also after a restore
// whose disk files were damaged (rank 0's failed attempt must leave no trace in its pool).
TEST(DiskTierKv, AnotherRankFollowsRestoresFromRank0sJournal) {
  auto dir = flint::testing::temp_dir("kv-disk-ranks");
  auto a = random_tokens(300, 71), b = random_tokens(300, 72), c = random_tokens(300, 73);
  std::vector<float> cold;
  // Twice: with intact files, then after damaging every other file (rank 0's first attempt
  // fails; the attempt that succeeds, if any, is all the other rank sees).
  for (bool damage : {false, true}) {
    SCOPED_TRACE(damage ? "damaged files" : "intact files");
    kv::KvCacheOptions o1 = disk_options(dir);
    o1.disk.reset();
    kv::KvCache rank0(tiny_model().config(), disk_options(dir)), rank1(tiny_model().config(), o1);
    rank0.set_recording(true);
    // One sequence, as the engine drives the ranks: rank 0 decides, the other replays.
    auto both = [&](const std::vector<int32_t>& tokens) {
      std::array<Outcome, 2> r;
      const auto id = rank0.open();
      r[0].restored = rank0.restore_prefix(id, tokens);
      EXPECT_TRUE(rank0.reserve(id, static_cast<int64_t>(tokens.size()) - r[0].restored));
      rank1.replay(rank0.take_journal());
      r[1].restored = rank1.length(id);
      for (int k = 0; k < 2; ++k) {
        kv::KvCache& cache = k == 0 ? rank0 : rank1;
        dsv4::ForwardRequest req{
            &cache.sequence(id),
            std::span<const int32_t>(tokens).subspan(static_cast<size_t>(r[0].restored)), false};
        r[k].logits = tiny_model().forward({&req, 1}, QuantSimulation::kOfficial);
      }
      rank0.commit(id, tokens);
      rank0.close(id);
      rank1.replay(rank0.take_journal());
      EXPECT_EQ(r[0].restored, r[1].restored);
      EXPECT_TRUE(same_bits(r[0].logits, r[1].logits));
      EXPECT_EQ(rank0.stats().pages_free, rank1.stats().pages_free);
      EXPECT_EQ(rank0.stats().pages_cached_free, rank1.stats().pages_cached_free);
      return r;
    };
    if (!damage) {
      cold = both(a)[0].logits;
      both(b);  // a's cached pages leave the pool: to disk on rank 0, dropped on rank 1
      auto again = both(a);
      EXPECT_EQ(again[0].restored, 256);
      EXPECT_GT(rank0.stats().disk_hit_tokens, 0);
      EXPECT_TRUE(same_bits(again[1].logits, cold));
      both(b);
      both(c);  // a's pages on disk only (written when the caches end)
      continue;
    }
    int damaged = 0, seen = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".kv" || seen++ % 2 != 0) continue;
      std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(entry.file_size() - 7));
      f.put('\x5a');
      ++damaged;
    }
    ASSERT_GT(damaged, 0);
    EXPECT_TRUE(same_bits(both(a)[1].logits, cold));
    EXPECT_GT(rank0.stats().disk_pages_rejected, 0);
    both(b);
    both(c);
    EXPECT_TRUE(same_bits(both(a)[1].logits, cold));
  }
}

}  // namespace
}  // namespace flint::engine
