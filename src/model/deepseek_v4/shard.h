// Tensor and expert parallelism: which part of every weight a rank keeps (Megatron's layout,
// as DeepSeek's own inference code splits V4 over GPUs).
//
//   column-parallel (rows of [out, in] kept): wq_b (the rank's heads), wo_a (its output
//     groups), the indexer's wq_b and weights_proj (its indexer heads), w1/w3 of the shared
//     expert (and of every routed expert without expert parallelism), the head (its vocab);
//   row-parallel (columns kept, copied: a row-major matrix has no column view): wo_b, w2 of
//     the shared expert (and of the routed experts without expert parallelism);
//   expert parallelism: routed experts [rank * E / N, (rank + 1) * E / N) whole, the others
//     dropped (never read, so never resident);
//   replicated: embedding, norms, hyper-connections, gate and routing, wq_a, wkv, the
//     compressors (one shared KV head: every rank needs the whole cache).
//
// So each layer needs two sums over ranks (attention output after wo_b, MoE output after
// w2 and the shared expert), one for the indexer's scores (its heads are split) and one
// gather of the logits. The model finds the rank's part from the weights' shapes (local
// heads = wq_b rows / head_dim, ...): forward code has no rank arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/comm.h"
#include "formats/loader.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace flint::dsv4 {

struct ShardPlan {
  int rank = 0;
  int size = 1;
  bool expert_parallel = false;
};

// How a model runs across ranks: the communicator (null: one process) and whether routed
// experts are partitioned (--enable-expert-parallel) or split like the shared expert.
struct ModelParallel {
  Comm* comm = nullptr;
  bool expert_parallel = false;
};

// The copies sharding made (column slices), owned by the model, and what drops the pages
// they were copied from (the rank no longer reads them; null: keep them).
struct ShardBuffers {
  std::vector<std::unique_ptr<std::vector<std::byte>>> buffers;
  std::function<void(std::span<const std::byte>)> release_source;
  uint64_t bytes() const;
};

// Throws flint::Error naming the config field that does not split `plan.size` ways (heads,
// output groups, indexer heads, expert sizes on the formats' 128 / 32 blocks, experts,
// vocabulary).
void check_shardable(const Config& c, const ShardPlan& plan);

// Cuts `w` down to the rank's part (views where rows are kept, copies where columns are).
void shard_target(TargetWeights& w, const Config& c, const ShardPlan& plan, ShardBuffers& buffers);
void shard_block(BlockWeights& w, const Config& c, const ShardPlan& plan, ShardBuffers& buffers);

// Every matrix the struct still holds, except the embedding (read a row at a time).
void for_each_matrix(const TargetWeights& w, const std::function<void(const WeightMatrix&)>& f);
void for_each_matrix(const BlockWeights& b, const std::function<void(const WeightMatrix&)>& f);

// Bytes of weights a rank streams: every matrix the struct still holds.
uint64_t weight_bytes(const TargetWeights& w);

// Reads one byte of every page of the matrix (data and scales): what the loader's read_pages
// does for a whole checkpoint, so that loading costs what it costs and resident memory is
// the rank's own.
void touch_pages(const WeightMatrix& m);

// The loader's NaN check of E8M0 scales for one kept matrix (a rank checks its own part
// only: on V4-Flash all scales are 8.6 GiB, most of them other ranks' experts). Throws
// flint::Error naming the tensor (from `params`) and the rank.
void check_kept_scales(const WeightMatrix& m, const LoadedParams& params, int rank);

}  // namespace flint::dsv4
