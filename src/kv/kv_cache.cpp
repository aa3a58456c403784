#include "kv/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/hash.h"
#include "base/log.h"

namespace flint::kv {

struct KvCache::Seq {
  std::unique_ptr<PagedSequence> kv;
  std::string salt;
  std::vector<uint64_t> hashes;  // chain hashes of the complete blocks so far
  int64_t window_from = 0;       // blocks before this one hold no window pages
  bool broken = false;           // a hash collision: register none of its later blocks
};

namespace {
uint64_t disk_key(uint64_t block_hash, int32_t slot) {
  return hash_combine(block_hash, static_cast<uint64_t>(slot) + 1);
}
}  // namespace

KvCache::KvCache(const dsv4::Config& config, KvCacheOptions options)
    : config_(config),
      options_(std::move(options)),
      layout_(make_kv_layout(config_, options_.block_size, options_.dtype)),
      pool_(options_.num_pages, layout_.page_bytes) {
  page_block_.assign(static_cast<size_t>(options_.num_pages), 0);
  page_slot_.assign(static_cast<size_t>(options_.num_pages), -1);
  pool_.on_evict = [this](int32_t page) { on_evict(page); };
  if (options_.disk && options_.prefix_caching) {
    DiskTierOptions d = *options_.disk;
    d.model_identity = layout_.identity(options_.model_identity);
    disk_ = std::make_unique<DiskTier>(std::move(d));
  }
}

KvCache::~KvCache() {
  pool_.on_evict = nullptr;
  if (disk_ == nullptr) return;
  // What the pool still caches goes to the disk tier too, so that a restart finds it. The
  // writer's queue is bounded: wait for it every 64 MiB.
  int64_t queued = 0;
  for (const auto& [hash, block] : blocks_) {
    for (int32_t slot = 0; slot < layout_.pages_per_block(); ++slot) {
      const int32_t page = block.pages[static_cast<size_t>(slot)];
      if (page < 0 || disk_->contains(disk_key(hash, slot))) continue;
      write_to_disk(hash, block, slot, page);
      if ((queued += layout_.page_bytes) >= (int64_t{64} << 20)) {
        disk_->flush();
        queued = 0;
      }
    }
  }
}

void KvCache::write_to_disk(uint64_t hash, const CachedBlock& block, int32_t slot, int32_t page) {
  const uint64_t key = disk_key(hash, slot);
  if (disk_->contains(key)) return;  // block hashes are write-once: it is the same bytes
  const uint8_t* bytes = pool_.data(page);
  disk_->put(key, disk_check(block.parent, block.tokens, block.salt, slot),
             std::vector<uint8_t>(bytes, bytes + layout_.page_bytes));
  ++stats_.disk_pages_written;
}

KvCache::Seq& KvCache::seq(SeqId id) {
  auto it = seqs_.find(id);
  FLINT_CHECK(it != seqs_.end(), "unknown KV sequence {}", id);
  return *it->second;
}
const KvCache::Seq& KvCache::seq(SeqId id) const {
  auto it = seqs_.find(id);
  FLINT_CHECK(it != seqs_.end(), "unknown KV sequence {}", id);
  return *it->second;
}

KvCache::SeqId KvCache::do_open(std::string salt) {
  auto s = std::make_unique<Seq>();
  s->kv = std::make_unique<PagedSequence>(config_, layout_, pool_);
  s->salt = std::move(salt);
  const SeqId id = next_id_++;
  seqs_.emplace(id, std::move(s));
  return id;
}

void KvCache::release_page(int32_t& page) {
  if (page < 0) return;
  pool_.release(page);
  page = -1;
}

void KvCache::do_close(SeqId id) {
  Seq& s = seq(id);
  // Last blocks first, so that under pressure a prompt's tail is evicted before its head.
  for (int64_t b = s.kv->num_blocks() - 1; b >= 0; --b) {
    for (int32_t slot = layout_.pages_per_block() - 1; slot >= 0; --slot)
      release_page(s.kv->page(b, slot));
  }
  seqs_.erase(id);
}

uint64_t KvCache::block_hash(uint64_t parent, std::span<const int32_t> tokens,
                             const std::string& salt) const {
  uint64_t seed = hash_combine(parent, hash64(salt.data(), salt.size(), 0x6b76));
  return hash64(tokens.data(), tokens.size_bytes(), seed);
}

const KvCache::CachedBlock* KvCache::find(uint64_t hash, uint64_t parent,
                                          std::span<const int32_t> tokens,
                                          const std::string& salt) const {
  auto it = blocks_.find(hash);
  if (it == blocks_.end()) return nullptr;
  const CachedBlock& b = it->second;
  if (b.parent != parent || b.salt != salt ||
      !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
    return nullptr;  // a hash collision: never served
  }
  return &b;
}

std::string KvCache::disk_check(uint64_t parent, std::span<const int32_t> tokens,
                                const std::string& salt, int32_t slot) const {
  std::string check;
  auto put = [&check](const void* p, size_t n) { check.append(static_cast<const char*>(p), n); };
  put(&slot, sizeof slot);
  put(&parent, sizeof parent);
  put(tokens.data(), tokens.size_bytes());
  put(salt.data(), salt.size());
  return check;
}

bool KvCache::slot_available(uint64_t hash, const CachedBlock* b, int32_t slot) const {
  if (b != nullptr && b->pages[static_cast<size_t>(slot)] >= 0) return true;
  const uint64_t key = disk_key(hash, slot);
  return replay_pages_.count(key) != 0 || (disk_ != nullptr && disk_->contains(key));
}

int64_t KvCache::do_restore_prefix(SeqId id, std::span<const int32_t> tokens,
                                   int64_t min_uncomputed) {
  Seq& s = seq(id);
  FLINT_CHECK(s.kv->length() == 0 && s.kv->num_blocks() == 0);
  stats_.prefix_queries += static_cast<int64_t>(tokens.size());
  if (!options_.prefix_caching || tokens.empty()) return 0;
  // A failed disk read drops that file; the next attempt finds a shorter prefix.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const int64_t restored = try_restore(s, tokens, std::max<int64_t>(1, min_uncomputed));
    if (restored >= 0) {
      stats_.prefix_hits += restored;
      return restored;
    }
  }
  return 0;
}

int64_t KvCache::try_restore(Seq& s, std::span<const int32_t> tokens, int64_t min_uncomputed) {
  const int64_t bs = layout_.block_size, n = static_cast<int64_t>(tokens.size());
  const int64_t k_max = std::max<int64_t>(0, n - min_uncomputed) / bs;
  const int32_t hist = layout_.history_pages, ppb = layout_.pages_per_block();
  struct Candidate {
    uint64_t hash, parent;
    const CachedBlock* record;
  };
  std::vector<Candidate> chain;
  uint64_t parent = 0;
  for (int64_t b = 0; b < k_max; ++b) {
    auto block_tokens = tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs));
    const uint64_t h = block_hash(parent, block_tokens, s.salt);
    const CachedBlock* rec = find(h, parent, block_tokens, s.salt);
    if (rec == nullptr && blocks_.count(h) != 0) break;  // collision
    bool ok = true;
    for (int32_t slot = 0; slot < hist && ok; ++slot) ok = slot_available(h, rec, slot);
    if (!ok) break;
    chain.push_back({h, parent, rec});
    parent = h;
  }
  // Resuming at block k's start needs the window rows of the sliding_window - 1 positions
  // before it.
  int64_t k = static_cast<int64_t>(chain.size());
  auto window_from = [&](int64_t blocks) {
    return std::max<int64_t>(0, blocks * bs - (layout_.sliding_window - 1)) / bs;
  };
  for (; k > 0; --k) {
    bool ok = true;
    for (int64_t b = window_from(k); b < k && ok; ++b) {
      for (int32_t slot = hist; slot < ppb && ok; ++slot)
        ok = slot_available(chain[static_cast<size_t>(b)].hash,
                            chain[static_cast<size_t>(b)].record, slot);
    }
    if (ok) break;
  }
  if (k == 0) return 0;

  auto needed = [&](int64_t b, int32_t slot) { return slot < hist || b >= window_from(k); };
  auto in_pool = [&](int64_t b, int32_t slot) {
    const CachedBlock* rec = chain[static_cast<size_t>(b)].record;
    return rec != nullptr && rec->pages[static_cast<size_t>(slot)] >= 0;
  };
  // Pages the pool lacks are read (from disk, or replaying, from rank 0's journal) before
  // the pool is touched: a failed read then leaves the pool as it was, and another rank,
  // which replays only rank 0's successful attempt, keeps the same pages and LRU order.
  std::vector<RestoredPage> reads;
  for (int64_t b = 0; b < k; ++b) {
    const Candidate& cand = chain[static_cast<size_t>(b)];
    auto block_tokens = tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs));
    for (int32_t slot = 0; slot < ppb; ++slot) {
      if (!needed(b, slot) || in_pool(b, slot)) continue;
      const uint64_t key = disk_key(cand.hash, slot);
      std::optional<std::vector<uint8_t>> bytes;
      if (auto r = replay_pages_.find(key); r != replay_pages_.end()) {
        bytes = std::move(r->second);
      } else if (disk_ != nullptr) {
        bytes = disk_->get(key, disk_check(cand.parent, block_tokens, s.salt, slot));
      }
      if (!bytes || static_cast<int64_t>(bytes->size()) != layout_.page_bytes) {
        ++stats_.disk_pages_rejected;
        return -1;
      }
      reads.push_back({key, b, slot, std::move(*bytes)});
    }
  }
  // The pool's pages first (so that allocating for the read ones cannot evict them).
  PagedSequence& kv = *s.kv;
  for (int64_t b = 0; b < k; ++b) kv.add_block();
  for (int64_t b = 0; b < k; ++b) {
    for (int32_t slot = 0; slot < ppb; ++slot) {
      if (!needed(b, slot) || !in_pool(b, slot)) continue;
      kv.page(b, slot) = chain[static_cast<size_t>(b)].record->pages[static_cast<size_t>(slot)];
      pool_.retain(kv.page(b, slot));
    }
  }
  if (static_cast<int64_t>(reads.size()) > pool_.num_free()) {  // no room for the read ones
    for (int64_t b = k - 1; b >= 0; --b)
      for (int32_t slot = 0; slot < ppb; ++slot) release_page(kv.page(b, slot));
    s.kv = std::make_unique<PagedSequence>(config_, layout_, pool_);
    return 0;
  }
  for (const RestoredPage& read : reads) {
    const Candidate& cand = chain[static_cast<size_t>(read.block)];
    auto it = blocks_.find(cand.hash);
    if (it == blocks_.end()) {
      auto block_tokens =
          tokens.subspan(static_cast<size_t>(read.block * bs), static_cast<size_t>(bs));
      it = blocks_
               .emplace(cand.hash, CachedBlock{cand.parent,
                                               {block_tokens.begin(), block_tokens.end()},
                                               s.salt,
                                               std::vector<int32_t>(static_cast<size_t>(ppb), -1)})
               .first;
    }
    const int32_t page = pool_.allocate();
    FLINT_CHECK(page >= 0, "the pool had {} free pages for {} read ones", pool_.num_free(),
                reads.size());
    std::memcpy(pool_.data(page), read.bytes.data(), read.bytes.size());
    ++stats_.disk_pages_read;
    kv.page(read.block, read.slot) = page;
    it->second.pages[static_cast<size_t>(read.slot)] = page;
    page_block_[static_cast<size_t>(page)] = cand.hash;
    page_slot_[static_cast<size_t>(page)] = read.slot;
    pool_.set_cached(page, true);
  }
  kv.resume_at(k);
  s.hashes.clear();
  for (int64_t b = 0; b < k; ++b) s.hashes.push_back(chain[static_cast<size_t>(b)].hash);
  s.window_from = window_from(k);
  if (!reads.empty()) stats_.disk_hit_tokens += k * bs;
  if (recording_) restored_pages_ = std::move(reads);
  return k * bs;
}

int64_t KvCache::pages_needed(SeqId id, int64_t n) const {
  const Seq& s = seq(id);
  const int64_t bs = layout_.block_size;
  const int64_t blocks = (s.kv->length() + n + bs - 1) / bs;
  return std::max<int64_t>(0, blocks - s.kv->num_blocks()) * layout_.pages_per_block();
}

bool KvCache::do_reserve(SeqId id, int64_t n) {
  Seq& s = seq(id);
  const int64_t need = pages_needed(id, n);
  if (need > pool_.num_free()) return false;
  const int64_t bs = layout_.block_size;
  while (s.kv->num_blocks() * bs < s.kv->length() + n) {
    const int64_t b = s.kv->num_blocks();
    s.kv->add_block();
    for (int32_t slot = 0; slot < layout_.pages_per_block(); ++slot) {
      s.kv->page(b, slot) = pool_.allocate();
      FLINT_CHECK(s.kv->page(b, slot) >= 0);
    }
  }
  return true;
}

void KvCache::register_block(Seq& s, int64_t block, uint64_t hash, uint64_t parent,
                             std::span<const int32_t> tokens) {
  auto it = blocks_.find(hash);
  if (it == blocks_.end()) {
    it = blocks_
             .emplace(hash, CachedBlock{parent,
                                        {tokens.begin(), tokens.end()},
                                        s.salt,
                                        std::vector<int32_t>(
                                            static_cast<size_t>(layout_.pages_per_block()), -1)})
             .first;
  } else if (find(hash, parent, tokens, s.salt) == nullptr) {
    s.broken = true;  // another prefix owns this hash; cache nothing more of this sequence
    return;
  }
  // Fill the slots the record lacks with this sequence's pages; where it has a page
  // already (another sequence computed the same block), ours stays private.
  CachedBlock& rec = it->second;
  for (int32_t slot = 0; slot < layout_.pages_per_block(); ++slot) {
    const int32_t page = s.kv->page(block, slot);
    if (page < 0 || rec.pages[static_cast<size_t>(slot)] >= 0) continue;
    rec.pages[static_cast<size_t>(slot)] = page;
    page_block_[static_cast<size_t>(page)] = hash;
    page_slot_[static_cast<size_t>(page)] = slot;
    pool_.set_cached(page, true);
  }
}

int64_t KvCache::hashed_tokens(SeqId id) const {
  return static_cast<int64_t>(seq(id).hashes.size()) * layout_.block_size;
}

void KvCache::do_commit(SeqId id, std::span<const int32_t> tokens) {
  Seq& s = seq(id);
  const int64_t bs = layout_.block_size, len = s.kv->length();
  FLINT_CHECK(static_cast<int64_t>(tokens.size()) >= len);
  while (static_cast<int64_t>(s.hashes.size()) < len / bs) {
    const int64_t b = static_cast<int64_t>(s.hashes.size());
    const uint64_t parent = b == 0 ? 0 : s.hashes.back();
    auto block_tokens = tokens.subspan(static_cast<size_t>(b * bs), static_cast<size_t>(bs));
    const uint64_t h = block_hash(parent, block_tokens, s.salt);
    s.hashes.push_back(h);
    if (options_.prefix_caching && !s.broken) register_block(s, b, h, parent, block_tokens);
  }
  // Window pages of blocks the window has left go back (cached ones stay findable).
  const int64_t keep_from = std::max<int64_t>(0, len - (layout_.sliding_window - 1)) / bs;
  for (; s.window_from < keep_from; ++s.window_from) {
    for (int32_t slot = layout_.history_pages; slot < layout_.pages_per_block(); ++slot)
      release_page(s.kv->page(s.window_from, slot));
  }
}

std::optional<KvCache::SeqId> KvCache::do_fork(SeqId id) {
  const SeqId child_id = do_open(seq(id).salt);
  Seq& src = seq(id);
  Seq& child = seq(child_id);
  const int64_t bs = layout_.block_size, full = src.kv->length() / bs;
  child.kv->copy_state(*src.kv);
  child.hashes = src.hashes;
  child.window_from = src.window_from;
  child.broken = src.broken;
  for (int64_t b = 0; b < src.kv->num_blocks(); ++b) {
    child.kv->add_block();
    for (int32_t slot = 0; slot < layout_.pages_per_block(); ++slot) {
      const int32_t page = src.kv->page(b, slot);
      if (page < 0) continue;
      if (b < full) {  // complete: never written again, so shared
        pool_.retain(page);
        child.kv->page(b, slot) = page;
        continue;
      }
      const int32_t copy = pool_.allocate();
      if (copy < 0) {
        do_close(child_id);
        return std::nullopt;
      }
      std::memcpy(pool_.data(copy), pool_.data(page), static_cast<size_t>(layout_.page_bytes));
      child.kv->page(b, slot) = copy;
    }
  }
  return child_id;
}

void KvCache::on_evict(int32_t page) {
  const uint64_t h = page_block_[static_cast<size_t>(page)];
  const int32_t slot = page_slot_[static_cast<size_t>(page)];
  auto it = blocks_.find(h);
  FLINT_CHECK(it != blocks_.end() && it->second.pages[static_cast<size_t>(slot)] == page,
              "evicted page {} is not registered where it says", page);
  if (disk_ != nullptr) write_to_disk(h, it->second, slot, page);
  it->second.pages[static_cast<size_t>(slot)] = -1;
  page_slot_[static_cast<size_t>(page)] = -1;
  if (std::all_of(it->second.pages.begin(), it->second.pages.end(),
                  [](int32_t p) { return p < 0; })) {
    blocks_.erase(it);
  }
}

dsv4::SequenceKv& KvCache::sequence(SeqId id) { return *seq(id).kv; }
int64_t KvCache::length(SeqId id) const { return seq(id).kv->length(); }

KvCacheStats KvCache::stats() const {
  KvCacheStats s = stats_;
  s.pages_total = pool_.num_pages();
  s.pages_free = pool_.num_free();
  s.pages_cached_free = pool_.num_cached_free();
  if (disk_) s.disk = disk_->stats();
  return s;
}

}  // namespace flint::kv
