// Where a sequence's attention cache lives, as the model sees it. The model computes; a
// store keeps. Two stores implement these interfaces: SequenceState (state.h), contiguous
// vectors owned by one sequence (tests, tools, drafts), and the engine's paged store
// (kv/paged_sequence.h), blocks in a shared pool with prefix caching.
//
// Per layer a store holds: the sliding-window KV rows, the compressed KV entries, the
// indexer's compressed keys (ratio-4 layers) and each compressor's pending block. Rows go
// in already rounded to the store's format (round_kv_rows with kv_format() / index_format()),
// so a row read back equals the row written, bit for bit.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/kv_codec.h"
#include "model/deepseek_v4/compressor_state.h"

namespace flint::dsv4 {

enum class CompressorKind { kMain, kIndex };

class LayerKv {
 public:
  virtual ~LayerKv() = default;

  virtual kernels::KvRowFormat kv_format() const = 0;     // window rows and entries
  virtual kernels::KvRowFormat index_format() const = 0;  // indexer keys

  // Window rows of positions [first, first + count); each must be among the last
  // sliding_window positions written. out: [count, head_dim].
  virtual void read_window(int64_t first, int64_t count, float* out) const = 0;
  // Rows of positions [first, first + count), in order. A store keeps at least the last
  // sliding_window positions written.
  virtual void write_window(int64_t first, int64_t count, const float* rows) = 0;

  virtual int64_t num_entries() const = 0;
  // Entries by id (each < num_entries()). out: [ids.size(), head_dim].
  virtual void read_entries(std::span<const int32_t> ids, float* out) const = 0;
  virtual void append_entries(const float* rows, int64_t count) = 0;

  // Indexer keys [first, first + count) (ratio-4 layers; as many as entries once a token
  // has been fed to both compressors).
  virtual int64_t num_index_keys() const = 0;
  virtual void read_index_keys(int64_t first, int64_t count, float* out) const = 0;
  virtual void append_index_keys(const float* rows, int64_t count) = 0;
  // Drops entries (indexer keys) beyond the first `count`: speculative rollback.
  virtual void truncate_entries(int64_t count) = 0;
  virtual void truncate_index_keys(int64_t count) = 0;

  virtual CompressorState& compressor(CompressorKind kind) = 0;
  // Called by the compressor right after the token at position `end - 1` was fed, for every
  // `end` that is a multiple of boundary_interval() (0: never). A paged store saves what
  // resuming at `end` needs (the overlap compressors' previous block).
  virtual int64_t boundary_interval() const { return 0; }
  virtual void save_boundary(CompressorKind, int64_t /*end*/, const CompressorState&) {}
};

class SequenceKv {
 public:
  virtual ~SequenceKv() = default;
  virtual int64_t length() const = 0;  // tokens stored = position of the next token
  virtual int64_t num_layers() const = 0;
  virtual LayerKv& layer(int64_t i) = 0;
  // Called once per forward call after every layer ran on `n` new tokens.
  virtual void advance(int64_t n) = 0;
  // Sets the length back to `length` (<= length()) after a speculative rollback restored
  // the layers (Model::rollback); rows of later positions are stale and never read.
  virtual void truncate(int64_t length) = 0;
};

}  // namespace flint::dsv4
