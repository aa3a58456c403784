// The KV cache's second tier: KV blocks evicted from the RAM pool, kept on local disk
// (vLLM's --kv-offloading-backend native; in flint the primary pool is already RAM).
//
// The KV cache hands over a block when the pool evicts it (put) and asks for it back when
// a prompt prefix misses the pool (get); a hit is copied into the pool instead of being
// recomputed. The tier is a cache: whatever goes wrong (a full disk, a torn or flipped
// file, another model's file, a hash collision) ends in a miss, never in wrong bytes, and
// never in an exception after construction.
//
// Keys and checks. `key` is the caller's 64-bit block hash; it names the file. `check` is
// an opaque byte string (the block's token ids, parent hash, salt...) stored in the file
// and compared exactly on get, so that two blocks whose hashes collide are never mixed up.
//
// Files. One file per block in `dir`, named "<model identity>-<key>.kv" (16 hex digits
// each), written to "<same>.kv.tmp" and renamed (atomic: a crash leaves at most a temp
// file, removed at the next start). Layout, little-endian:
//     0  8  magic "FLINTKVB"
//     8  4  format version (1)
//    12  4  check length C
//    16  8  model identity
//    24  8  key
//    32  8  payload length P
//    40  8  checksum: hash64 of bytes [0, 40), then the check, then the payload
//    48  C  check bytes
//  48+C  P  payload
// Writes are not fsync'ed: after a power loss a file may hold garbage, which the checksum
// turns into a miss.
//
// Models sharing a directory. Files of another model identity are "foreign": they are
// counted at start-up, never read, never deleted and not charged to this tier's capacity
// (they are another model's cache, possibly in use by another process right now). So a
// directory shared by several models holds up to the sum of their capacities. A file
// under this model's name whose header names another identity is removed when read.
// One process per (directory, model identity): a second one throws at construction
// (an flock on "<dir>/<model identity>.lock"), since two writers would evict each
// other's files behind each other's indexes.
//
// Eviction. Least recently used first, by put or get; at start-up the order is rebuilt
// from file modification times (a hit refreshes its file's mtime). A write that would
// exceed capacity_bytes first evicts files (on the writer thread).
//
// Threads. put/get/contains/stats/flush may be called from any thread; one mutex guards
// the index, held only for bookkeeping, never across file I/O except the unlink of a file
// found corrupt. Files are written by one background thread so that the engine's step
// loop never waits for the disk on put.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace flint::kv {

struct DiskTierOptions {
  std::filesystem::path dir;   // created if missing; the caller picks the default
  int64_t capacity_bytes = 0;  // the cap on this model's files (headers included), > 0
  // What a block's bytes mean: config, weights, KV layout and dtype, hashed by the caller.
  // Blocks of another identity are never served.
  uint64_t model_identity = 0;
  // Bytes (payload + check) waiting for the writer; a put beyond this is dropped.
  int64_t max_queued_bytes = int64_t{256} << 20;
};

struct DiskTierStats {
  int64_t files = 0, bytes = 0;           // this model's files on disk now, and their size
  int64_t writes = 0, write_bytes = 0;    // files written since construction
  int64_t reads_hit = 0, reads_miss = 0;  // get() outcomes (a rejected file is a miss)
  int64_t corrupt = 0;  // files rejected: torn, bad magic/size/checksum, another key
  // Files of another model identity (start-up scan: by name, left alone) or of another
  // model identity or format version under this model's name (get: removed).
  int64_t foreign = 0;
  int64_t collisions = 0;      // gets whose key matched but check bytes did not
  int64_t evicted = 0;         // files removed to stay under capacity
  int64_t dropped_writes = 0;  // puts not written: queue full, or larger than capacity
  int64_t write_errors = 0;    // writes that failed (disk full, permissions...)
};

class DiskTier {
 public:
  // Creates `dir` if needed, takes the per-identity lock, removes this identity's stale
  // temp files, indexes its block files (one stat per file, no reads) and evicts down to
  // capacity if it shrank since the last run. Throws flint::Error naming the directory if
  // it cannot be created or listed, if capacity_bytes <= 0, or if another process holds
  // the lock. Starts the writer thread.
  explicit DiskTier(DiskTierOptions options);
  // Writes everything still queued, then joins the writer thread.
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // Queues the block for the writer and returns at once (cost: a lock and moving the
  // vectors in). A key already on disk or queued is not written again (block hashes are
  // write-once: same key, same block), only marked as recently used. Dropped and counted
  // if the queue holds max_queued_bytes already, the file could never fit in capacity or
  // the check is 4 GiB or more. A block larger than max_queued_bytes is still taken when
  // nothing else is queued.
  void put(uint64_t key, std::string check, std::vector<uint8_t> payload);

  // The payload stored under `key` if its check bytes equal `check`; nullopt otherwise.
  // Synchronous: reads and checksums the whole file on the calling thread (about the cost
  // of reading the file from the page cache or disk). Every header field, the file size
  // and the checksum are verified; a file failing any of them is counted, removed and
  // reported as a miss. A block still queued is served from memory.
  std::optional<std::vector<uint8_t>> get(uint64_t key, std::string_view check);

  // Whether `key` is indexed or queued (no I/O, no verification: get may still miss).
  bool contains(uint64_t key) const;

  DiskTierStats stats() const;
  const DiskTierOptions& options() const { return options_; }

  // Blocks until nothing is queued or being written, so every earlier put is on disk (or
  // counted as a write error). For tests and shutdown: puts from other threads meanwhile
  // prolong the wait.
  void flush();

 private:
  struct Pending {
    uint64_t key;
    std::string check;
    std::vector<uint8_t> payload;
  };
  struct Entry {
    int64_t bytes;
    uint64_t generation;  // tells a re-written file from the one a reader looked at
    std::list<uint64_t>::iterator lru;
  };

  std::filesystem::path block_path(uint64_t key) const;
  void scan();
  void writer_loop();
  bool write_file(const Pending& block, int64_t file_bytes);
  // Removes the index entry (and its file) if it is still `generation`; mutex_ held.
  void drop_locked(uint64_t key, uint64_t generation, bool unlink_file);
  void evict_locked(int64_t incoming, std::vector<uint64_t>& victims);

  const DiskTierOptions options_;
  int lock_fd_ = -1;

  mutable std::mutex mutex_;
  std::condition_variable work_;  // the writer waits for queue_ or stop_
  std::condition_variable idle_;  // flush() waits for pending_ to empty
  std::unordered_map<uint64_t, Entry> index_;
  std::list<uint64_t> lru_;  // front: most recently used
  std::deque<std::shared_ptr<const Pending>> queue_;
  // Queued and in-flight blocks by key (get serves them from memory).
  std::unordered_map<uint64_t, std::shared_ptr<const Pending>> pending_;
  int64_t queued_bytes_ = 0;
  uint64_t next_generation_ = 1;
  bool stop_ = false;
  DiskTierStats stats_;
  bool warned_write_error_ = false;

  std::thread writer_;  // started at the end of the constructor, once the index is built
};

}  // namespace flint::kv
