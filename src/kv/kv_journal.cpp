// KvCache's public calls that change it: each runs the implementation, then (when recording,
// and not inside another recorded call) appends one journal entry: the call, its arguments
// and its result. replay() runs the entries on another rank's cache and checks the results.
#include <fmt/format.h>

#include "base/bytes.h"
#include "base/error.h"
#include "kv/kv_cache.h"

namespace flint::kv {

namespace {

// Counts the nesting of recorded calls: fork opens a sequence, but the journal holds one
// fork, which opens it again on replay.
struct Nest {
  explicit Nest(int& n) : n_(n) { ++n_; }
  ~Nest() { --n_; }
  int& n_;
};

}  // namespace

bool KvCache::record(Op op) {
  if (!recording_ || nested_ > 0) return false;
  journal_.push_back(static_cast<uint8_t>(op));
  return true;
}

KvCache::SeqId KvCache::open(std::string salt) {
  SeqId id;
  {
    Nest nest(nested_);
    id = do_open(salt);
  }
  if (record(Op::kOpen)) {
    ByteWriter w(journal_);
    w.put_string(salt);
    w.put<SeqId>(id);
  }
  return id;
}

void KvCache::close(SeqId id) {
  {
    Nest nest(nested_);
    do_close(id);
  }
  if (record(Op::kClose)) ByteWriter(journal_).put<SeqId>(id);
}

int64_t KvCache::restore_prefix(SeqId id, std::span<const int32_t> tokens, int64_t min_uncomputed) {
  int64_t restored;
  {
    Nest nest(nested_);
    restored = do_restore_prefix(id, tokens, min_uncomputed);
  }
  if (record(Op::kRestore)) {
    ByteWriter w(journal_);
    w.put<SeqId>(id);
    w.put_span(tokens);
    w.put<int64_t>(min_uncomputed);
    w.put<int64_t>(restored);
    // The pages read from the disk tier travel with the call: the other ranks have none.
    w.put<uint64_t>(restored_pages_.size());
    for (const RestoredPage& p : restored_pages_) {
      w.put<uint64_t>(p.key);
      w.put_span(std::span<const uint8_t>(p.bytes));
    }
  }
  restored_pages_.clear();
  return restored;
}

bool KvCache::reserve(SeqId id, int64_t n) {
  bool ok;
  {
    Nest nest(nested_);
    ok = do_reserve(id, n);
  }
  if (record(Op::kReserve)) {
    ByteWriter w(journal_);
    w.put<SeqId>(id);
    w.put<int64_t>(n);
    w.put<uint8_t>(ok ? 1 : 0);
  }
  return ok;
}

void KvCache::commit(SeqId id, std::span<const int32_t> tokens) {
  // commit reads only the tokens of the blocks it completes: the journal carries those.
  const int64_t first = hashed_tokens(id);
  {
    Nest nest(nested_);
    do_commit(id, tokens);
  }
  if (record(Op::kCommit)) {
    const int64_t end = hashed_tokens(id);
    ByteWriter w(journal_);
    w.put<SeqId>(id);
    w.put<int64_t>(first);
    w.put_span(tokens.subspan(static_cast<size_t>(first), static_cast<size_t>(end - first)));
  }
}

std::optional<KvCache::SeqId> KvCache::fork(SeqId id) {
  std::optional<SeqId> child;
  {
    Nest nest(nested_);
    child = do_fork(id);
  }
  if (record(Op::kFork)) {
    ByteWriter w(journal_);
    w.put<SeqId>(id);
    w.put<SeqId>(child.value_or(-1));
  }
  return child;
}

void KvCache::replay(std::span<const uint8_t> journal) {
  ByteReader r(journal);
  auto diverged = [](const char* call, auto mine, auto theirs) {
    throw Error("the KV caches of the ranks diverged: {} gave {} here and {} on rank 0", call, mine,
                theirs);
  };
  while (!r.done()) {
    switch (static_cast<Op>(r.get<uint8_t>())) {
      case Op::kOpen: {
        const std::string salt = r.get_string();
        const SeqId want = r.get<SeqId>();
        if (const SeqId got = open(salt); got != want) diverged("open", got, want);
        break;
      }
      case Op::kClose:
        close(r.get<SeqId>());
        break;
      case Op::kRestore: {
        const SeqId id = r.get<SeqId>();
        const std::vector<int32_t> tokens = r.get_vector<int32_t>();
        const int64_t min_uncomputed = r.get<int64_t>();
        const int64_t want = r.get<int64_t>();
        for (auto pages = r.get<uint64_t>(); pages > 0; --pages) {
          const auto key = r.get<uint64_t>();
          replay_pages_[key] = r.get_vector<uint8_t>();
        }
        const int64_t got = restore_prefix(id, tokens, min_uncomputed);
        replay_pages_.clear();
        if (got != want) diverged("restore_prefix", got, want);
        break;
      }
      case Op::kReserve: {
        const SeqId id = r.get<SeqId>();
        const int64_t n = r.get<int64_t>();
        const bool want = r.get<uint8_t>() != 0;
        if (const bool got = reserve(id, n); got != want) diverged("reserve", got, want);
        break;
      }
      case Op::kCommit: {
        const SeqId id = r.get<SeqId>();
        const int64_t first = r.get<int64_t>();
        const std::vector<int32_t> part = r.get_vector<int32_t>();
        // The positions before `first` are not read (their blocks are hashed already).
        std::vector<int32_t> tokens(static_cast<size_t>(std::max(length(id), first)), 0);
        tokens.resize(std::max(tokens.size(), static_cast<size_t>(first) + part.size()));
        std::copy(part.begin(), part.end(), tokens.begin() + first);
        commit(id, tokens);
        break;
      }
      case Op::kFork: {
        const SeqId id = r.get<SeqId>();
        const SeqId want = r.get<SeqId>();
        if (const SeqId got = fork(id).value_or(-1); got != want) diverged("fork", got, want);
        break;
      }
      default:
        throw Error("the KV journal holds an unknown call (a bug)");
    }
  }
}

}  // namespace flint::kv
