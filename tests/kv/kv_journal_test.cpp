// The KV cache's journal (tensor parallelism: rank 0 records, the other ranks replay): a
// replayed cache holds the same sequences, block tables and prefix blocks; a cache that
// cannot follow (another pool size) says that the ranks diverged instead of going on.
#include <gtest/gtest.h>

#include <numeric>

#include "base/error.h"
#include "kv/kv_cache.h"
#include "kv/paged_sequence.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

namespace flint::kv {
namespace {

KvCacheOptions options(int64_t pages) {
  KvCacheOptions o;
  o.block_size = 128;
  o.num_pages = pages;
  return o;
}

// Rank 0 and another rank, as the engine drives them: rank 0's calls are recorded; before
// each forward call the other rank replays the journal so far; both run the forward call
// (here only its bookkeeping: the lengths advance).
struct TwoRanks {
  KvCache rank0, rank1;
  TwoRanks(const dsv4::Config& c, int64_t pages)
      : rank0(c, options(pages)), rank1(c, options(pages)) {
    rank0.set_recording(true);
  }
  void forward(KvCache::SeqId id, const std::vector<int32_t>& tokens, int64_t n) {
    ASSERT_TRUE(rank0.reserve(id, n));
    rank1.replay(rank0.take_journal());
    rank0.sequence(id).advance(n);
    rank1.sequence(id).advance(n);
    rank0.commit(id, std::span<const int32_t>(tokens).first(static_cast<size_t>(rank0.length(id))));
  }
};

std::vector<int32_t> block_table(KvCache& c, KvCache::SeqId id) {
  auto& s = dynamic_cast<PagedSequence&>(c.sequence(id));
  std::vector<int32_t> pages;
  for (int64_t b = 0; b < s.num_blocks(); ++b)
    for (int32_t slot = 0; slot < s.layout().pages_per_block(); ++slot)
      pages.push_back(s.page(b, slot));
  return pages;
}

TEST(KvJournal, ReplayBuildsTheSameCache) {
  TwoRanks r(dsv4::tiny_preset("tiny"), 400);
  KvCache& rank0 = r.rank0;
  std::vector<int32_t> a(700);
  std::iota(a.begin(), a.end(), 3);
  std::vector<int32_t> b(a.begin(), a.begin() + 300);
  b.push_back(9);

  const auto s1 = rank0.open("salt");
  r.forward(s1, a, 300);
  r.forward(s1, a, 1);
  const auto s2 = rank0.open("salt");
  EXPECT_EQ(rank0.restore_prefix(s2, b), 256);  // two blocks of s1, from the prefix cache
  r.rank1.replay(rank0.take_journal());         // (a restore is followed by its forward)
  r.forward(s2, b, 301 - 256);
  const std::optional<KvCache::SeqId> s3 = rank0.fork(s2);
  ASSERT_TRUE(s3.has_value());
  rank0.close(s1);
  EXPECT_FALSE(rank0.reserve(*s3, 1 << 20));  // refused: recorded as refused
  const auto s4 = rank0.open("other");
  EXPECT_EQ(rank0.restore_prefix(s4, b), 0);  // another salt finds nothing
  r.rank1.replay(rank0.take_journal());
  EXPECT_TRUE(rank0.take_journal().empty());

  for (KvCache::SeqId id : {s2, *s3, s4}) {
    EXPECT_EQ(block_table(rank0, id), block_table(r.rank1, id)) << "sequence " << id;
    EXPECT_EQ(rank0.length(id), r.rank1.length(id)) << "sequence " << id;
  }
  EXPECT_EQ(rank0.stats().pages_free, r.rank1.stats().pages_free);
  EXPECT_EQ(rank0.stats().pages_cached_free, r.rank1.stats().pages_cached_free);
  EXPECT_EQ(rank0.stats().prefix_hits, r.rank1.stats().prefix_hits);
  EXPECT_EQ(r.rank1.stats().prefix_hits, 256);
}

TEST(KvJournal, ACacheThatCannotFollowSaysSo) {
  const dsv4::Config config = dsv4::tiny_preset("tiny");
  KvCache rank0(config, options(400)), small(config, options(12));
  rank0.set_recording(true);
  const auto s = rank0.open();
  ASSERT_TRUE(rank0.reserve(s, 1000));
  try {
    small.replay(rank0.take_journal());
    FAIL() << "a replay with a smaller pool went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diverged: reserve"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flint::kv
