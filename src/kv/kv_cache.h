// The KV cache manager: the paged pool, the sequences' block tables, the prefix cache and
// the disk tier, behind an opaque sequence id. The scheduler asks it questions in pages
// and tokens (how many pages would these tokens need, take them, give them back); the
// engine's execute stage gets each sequence's SequenceKv for the model. It never sees a
// request, the scheduler never sees a page's bytes.
//
// Prefix caching (vLLM's design, exact): a block of block_size tokens is identified by a
// chain hash of (parent block's hash, its token ids, the request's cache_salt); full blocks
// are registered with their pages, and a new sequence takes back the longest chain of
// registered blocks whose pages are still in the pool (or, with a disk tier, on disk). The
// hash only finds a candidate: the parent hash, token ids and salt are compared exactly, so
// a collision can never serve another prompt's KV. A restored prefix gives the same
// logits as computing it (each block stores what resuming at its end needs).
//
// Not thread-safe: owned by the engine thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/disk_tier.h"
#include "kv/kv_layout.h"
#include "kv/page_pool.h"
#include "kv/paged_sequence.h"
#include "model/deepseek_v4/config.h"

namespace flint::kv {

struct KvCacheOptions {
  int64_t block_size = 256;
  kernels::KvDtype dtype = kernels::KvDtype::kFp8;
  int64_t num_pages = 0;
  bool prefix_caching = true;
  std::optional<DiskTierOptions> disk;  // the second tier (its model_identity is filled in)
  uint64_t model_identity = 0;          // what the weights are (config + checkpoint)
};

struct KvCacheStats {
  int64_t pages_total = 0, pages_free = 0, pages_cached_free = 0;
  int64_t prefix_queries = 0;   // prompt tokens looked up
  int64_t prefix_hits = 0;      // of those, restored from the cache instead of computed
  int64_t disk_hit_tokens = 0;  // of the hits, read back from the disk tier
  int64_t disk_pages_read = 0, disk_pages_written = 0, disk_pages_rejected = 0;
  std::optional<DiskTierStats> disk;
};

class KvCache {
 public:
  using SeqId = int64_t;

  KvCache(const dsv4::Config& config, KvCacheOptions options);
  // With a disk tier, hands it every cached page it lacks (so a restart finds them) and
  // waits for the writes.
  ~KvCache();

  const KvLayout& layout() const { return layout_; }
  const KvCacheOptions& options() const { return options_; }

  SeqId open(std::string salt = {});
  // Releases every page of the sequence (registered ones stay findable until evicted).
  void close(SeqId id);

  // Restores the longest cached prefix of `tokens` into an empty sequence: whole blocks,
  // leaving at least `min_uncomputed` (>= 1) tokens to compute (a draft that reads the
  // target's hidden states of the last tokens needs them computed). Returns the tokens
  // restored (0 without prefix caching). Counts the query and the hit.
  int64_t restore_prefix(SeqId id, std::span<const int32_t> tokens, int64_t min_uncomputed = 1);
  // Pages that tokens [length, length + n) would take now.
  int64_t pages_needed(SeqId id, int64_t n) const;
  // Takes those pages; false (and nothing taken) if the pool has too few free pages.
  bool reserve(SeqId id, int64_t n);
  // After a forward call: `tokens` are the sequence's first length() tokens. Registers
  // the blocks completed since the last commit and releases window pages that slid out.
  void commit(SeqId id, std::span<const int32_t> tokens);
  // A new sequence with the same contents: complete blocks shared, the partial block
  // copied. nullopt if the pool cannot hold the copy.
  std::optional<SeqId> fork(SeqId id);

  // Replication across ranks (tensor parallelism: every rank keeps the whole cache, docs/
  // parallel.md). With recording on, every call that changes the cache (open, close,
  // restore_prefix, reserve, commit, fork) is appended to a journal with its result; another
  // rank's cache, built with the same options, replays it in order and so holds the same
  // sequence ids, pages and prefix blocks. take_journal() hands over what was recorded.
  void set_recording(bool on) { recording_ = on; }
  std::vector<uint8_t> take_journal() { return std::exchange(journal_, {}); }
  // Throws flint::Error if a replayed call's result differs from the recorded one (the
  // caches diverged: a bug, reported rather than computed on).
  void replay(std::span<const uint8_t> journal);

  bool is_open(SeqId id) const { return seqs_.count(id) != 0; }
  dsv4::SequenceKv& sequence(SeqId id);
  int64_t length(SeqId id) const;
  KvCacheStats stats() const;
  int64_t num_free_pages() const { return pool_.num_free(); }

 private:
  struct Seq;
  struct CachedBlock {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
    std::string salt;
    std::vector<int32_t> pages;  // per slot; -1 once evicted
  };
  // The implementations of the public calls of the same names (these record them).
  SeqId do_open(std::string salt);
  void do_close(SeqId id);
  int64_t do_restore_prefix(SeqId id, std::span<const int32_t> tokens, int64_t min_uncomputed);
  bool do_reserve(SeqId id, int64_t n);
  void do_commit(SeqId id, std::span<const int32_t> tokens);
  std::optional<SeqId> do_fork(SeqId id);
  Seq& seq(SeqId id);
  const Seq& seq(SeqId id) const;
  int64_t hashed_tokens(SeqId id) const;  // tokens of the blocks commit has hashed
  uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens,
                      const std::string& salt) const;
  const CachedBlock* find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens,
                          const std::string& salt) const;
  // A page read back for a restore: the disk key, where it goes, its bytes.
  struct RestoredPage {
    uint64_t key;
    int64_t block;
    int32_t slot;
    std::vector<uint8_t> bytes;
  };
  std::string disk_check(uint64_t parent, std::span<const int32_t> tokens, const std::string& salt,
                         int32_t slot) const;
  bool slot_available(uint64_t hash, const CachedBlock* b, int32_t slot) const;
  int64_t try_restore(Seq& s, std::span<const int32_t> tokens, int64_t min_uncomputed);
  void register_block(Seq& s, int64_t block, uint64_t hash, uint64_t parent,
                      std::span<const int32_t> tokens);
  void on_evict(int32_t page);
  void write_to_disk(uint64_t hash, const CachedBlock& block, int32_t slot, int32_t page);
  void release_page(int32_t& page);

  enum class Op : uint8_t { kOpen, kClose, kRestore, kReserve, kCommit, kFork };
  // Starts a journal entry for `op` if recording and not inside another recorded call.
  bool record(Op op);

  dsv4::Config config_;
  KvCacheOptions options_;
  bool recording_ = false;
  int nested_ = 0;  // > 0 inside a recorded call (fork opens a sequence: one entry, not two)
  std::vector<uint8_t> journal_;
  // Disk pages and ranks: only rank 0 has a disk tier. A restore that read pages from it
  // leaves them here for the journal (restored_pages_), and another rank's replay serves
  // them from rank 0's journal (replay_pages_, by disk key) instead of a disk.
  std::vector<RestoredPage> restored_pages_;
  std::unordered_map<uint64_t, std::vector<uint8_t>> replay_pages_;
  KvLayout layout_;
  PagePool pool_;
  std::unique_ptr<DiskTier> disk_;
  std::unordered_map<SeqId, std::unique_ptr<Seq>> seqs_;
  SeqId next_id_ = 1;
  std::unordered_map<uint64_t, CachedBlock> blocks_;
  std::vector<uint64_t> page_block_;  // per page: the hash of the block it is registered in
  std::vector<int32_t> page_slot_;
  KvCacheStats stats_;
};

}  // namespace flint::kv
