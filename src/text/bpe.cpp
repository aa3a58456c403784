#include "text/bpe.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <climits>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/check.h"

namespace flint::text {

namespace {

std::atomic<uint64_t> next_instance_id{1};

// Word -> ids, one per (thread, model). Values live in one arena; the whole cache is dropped
// when it grows past its bounds, which keeps memory bounded without LRU bookkeeping.
struct WordCache {
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  static constexpr std::size_t kMaxWords = 1 << 16;
  static constexpr std::size_t kMaxIds = 1 << 20;

  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> words;
  std::vector<int32_t> ids;

  void insert(std::string_view word, const int32_t* first, std::size_t count) {
    if (words.size() >= kMaxWords || ids.size() + count > kMaxIds) {
      words.clear();
      ids.clear();
    }
    words.emplace(std::string(word),
                  std::make_pair(static_cast<uint32_t>(ids.size()), static_cast<uint32_t>(count)));
    ids.insert(ids.end(), first, first + count);
  }
};

WordCache& thread_cache(uint64_t instance_id) {
  // A thread rarely sees more than one tokenizer; keep the caches of the four most recent,
  // most recently used first.
  struct Slot {
    uint64_t instance_id = 0;  // 0: unused (instance ids start at 1)
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::array<Slot, 4> slots;
  std::size_t index = 0;
  while (index < slots.size() && slots[index].instance_id != instance_id) ++index;
  if (index == slots.size()) {
    index = slots.size() - 1;
    Slot& victim = slots[index];
    victim.instance_id = instance_id;
    if (victim.cache) {
      victim.cache->words.clear();
      victim.cache->ids.clear();
    } else {
      victim.cache = std::make_unique<WordCache>();
    }
  }
  std::rotate(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(index),
              slots.begin() + static_cast<std::ptrdiff_t>(index) + 1);
  return *slots[0].cache;
}

struct HeapEntry {
  int32_t rank;
  int32_t pos;
  int32_t left;
  int32_t right;
  int32_t merged;
};
// std::push_heap builds a max-heap: "less" means lower priority, i.e. larger (rank, pos).
struct HeapOrder {
  bool operator()(const HeapEntry& a, const HeapEntry& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

BpeModel::BpeModel(const std::array<int32_t, 256>& byte_ids, const std::vector<BpeMerge>& merges)
    : byte_ids_(byte_ids), merge_count_(merges.size()), instance_id_(next_instance_id++) {
  std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, merges.size() * 2));
  table_.assign(capacity, PairEntry{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& m = merges[rank];
    uint64_t key = pair_key(m.left, m.right);
    std::size_t slot = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (table_[slot].key != kEmpty && table_[slot].key != key) slot = (slot + 1) & mask_;
    table_[slot] = PairEntry{key, static_cast<int32_t>(rank), m.merged};
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  FLINT_DCHECK(!word.empty());
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (word.size() > kMaxCachedWordBytes) {
    heap_merge(word, out);
    return;
  }
  WordCache& cache = thread_cache(instance_id_);
  if (auto it = cache.words.find(word); it != cache.words.end()) {
    auto [offset, count] = it->second;
    out.insert(out.end(), cache.ids.begin() + offset, cache.ids.begin() + offset + count);
    return;
  }
  std::size_t first = out.size();
  if (word.size() <= kScanLimit) {
    scan_merge(word, out);
  } else {
    heap_merge(word, out);
  }
  cache.insert(word, out.data() + first, out.size() - first);
}

void BpeModel::encode_word_uncached(std::string_view word, Algorithm algorithm,
                                    std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (algorithm == Algorithm::kScan) {
    scan_merge(word, out);
  } else {
    heap_merge(word, out);
  }
}

// Repeatedly finds the lowest-ranked adjacent pair by a linear scan. O(n^2) with a small
// constant; any length works, but it is only chosen for short words.
void BpeModel::scan_merge(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> ids, ranks, merged;
  const std::size_t n0 = word.size();
  ids.resize(n0);
  ranks.resize(n0);
  merged.resize(n0);
  for (std::size_t i = 0; i < n0; ++i) ids[i] = byte_ids_[static_cast<uint8_t>(word[i])];
  auto rate = [&](std::size_t i) {
    const PairEntry* e = find_pair(ids[i], ids[i + 1]);
    ranks[i] = e ? e->rank : INT32_MAX;
    merged[i] = e ? e->merged : -1;
  };
  std::size_t n = n0;
  for (std::size_t i = 0; i + 1 < n; ++i) rate(i);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    ids[best] = merged[best];
    for (std::size_t i = best + 1; i + 1 < n; ++i) {
      ids[i] = ids[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --n;
    if (best > 0) rate(best - 1);
    if (best + 1 < n) rate(best);
  }
  out.insert(out.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

// Heap of candidate merges ordered by (rank, position); entries are validated when popped
// (a symbol's id only changes by absorbing its right neighbour, so a stale entry never matches
// the current ids). O(n log n).
void BpeModel::heap_merge(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> ids, prev, next;
  thread_local std::vector<HeapEntry> heap;
  const auto n = static_cast<int32_t>(word.size());
  ids.resize(word.size());
  prev.resize(word.size());
  next.resize(word.size());
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = byte_ids_[static_cast<uint8_t>(word[static_cast<std::size_t>(i)])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  auto push = [&](int32_t left_pos) {
    int32_t right_pos = next[left_pos];
    const PairEntry* e = find_pair(ids[left_pos], ids[right_pos]);
    if (e == nullptr) return;
    heap.push_back({e->rank, left_pos, ids[left_pos], ids[right_pos], e->merged});
    std::push_heap(heap.begin(), heap.end(), HeapOrder{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), HeapOrder{});
    HeapEntry e = heap.back();
    heap.pop_back();
    if (ids[e.pos] != e.left) continue;
    int32_t right = next[e.pos];
    if (right < 0 || ids[right] != e.right) continue;
    ids[e.pos] = e.merged;
    ids[right] = -1;
    next[e.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = e.pos;
    if (prev[e.pos] >= 0) push(prev[e.pos]);
    if (next[e.pos] >= 0) push(e.pos);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

}  // namespace flint::text
