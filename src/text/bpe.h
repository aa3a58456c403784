// Byte-level BPE merging: one pre-tokenized word (raw bytes) -> token ids.
//
// A word starts as one symbol per byte; the adjacent pair with the lowest merge rank is merged
// repeatedly (ties: the leftmost pair) until no adjacent pair has a merge. This is the order of
// the reference tokenizer (transformers.js / Hugging Face tokenizers).
//
// Cost: words of up to kScanLimit bytes use a linear rescan (fastest for the short words that
// make up most text); longer words use a binary heap with lazy invalidation, O(n log n).
// Results for words up to kMaxCachedWordBytes are cached per thread and model (at most 64k
// words and 1M ids, about 10 MB; cleared when full), so repeated words cost one hash lookup.
// The pair table is an open-addressing hash map (16 bytes per merge, load factor <= 1/2).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace flint::text {

struct BpeMerge {
  int32_t left = 0;
  int32_t right = 0;
  int32_t merged = 0;
};

class BpeModel {
 public:
  static constexpr std::size_t kScanLimit = 24;
  static constexpr std::size_t kMaxCachedWordBytes = 96;

  BpeModel() = default;
  // byte_ids[b] is the token id of the single byte b; merges are in rank order (rank = index;
  // if a pair appears twice, the later rank wins, as in the reference's Map).
  BpeModel(const std::array<int32_t, 256>& byte_ids, const std::vector<BpeMerge>& merges);

  // Appends the ids of `word` (non-empty bytes) to `out`. Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // The same without the cache, forcing one algorithm (for tests and benchmarks).
  enum class Algorithm { kScan, kHeap };
  void encode_word_uncached(std::string_view word, Algorithm algorithm,
                            std::vector<int32_t>& out) const;

  std::size_t merge_count() const { return merge_count_; }

 private:
  struct PairEntry {
    uint64_t key = kEmpty;  // (left << 32) | right
    int32_t rank = 0;
    int32_t merged = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // The merge of (left, right), or nullptr.
  const PairEntry* find_pair(int32_t left, int32_t right) const {
    uint64_t key = pair_key(left, right);
    std::size_t slot = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (true) {
      const PairEntry& e = table_[slot];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      slot = (slot + 1) & mask_;
    }
  }
  void scan_merge(std::string_view word, std::vector<int32_t>& out) const;
  void heap_merge(std::string_view word, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_{};
  std::vector<PairEntry> table_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t merge_count_ = 0;
  uint64_t instance_id_ = 0;  // keys the per-thread word caches
};

}  // namespace flint::text
