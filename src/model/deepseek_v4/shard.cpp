#include "model/deepseek_v4/shard.h"

#include <functional>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"

namespace flint::dsv4 {

namespace {

// Rows [part * rows / n, (part + 1) * rows / n): a view.
void keep_rows(WeightMatrix& m, int part, int n) {
  const int64_t per = m.rows / n;
  FLINT_CHECK(per * n == m.rows && m.can_cut_rows_at(part * per), "check_shardable missed a cut");
  m = m.row_slice(part * per, (part + 1) * per);
}

void keep_columns(WeightMatrix& m, int part, int n, ShardBuffers& buffers) {
  const int64_t per = m.cols / n;
  FLINT_CHECK(per * n == m.cols, "check_shardable missed a cut");
  buffers.buffers.push_back(std::make_unique<std::vector<std::byte>>());
  const WeightMatrix whole = m;
  m = m.copy_columns(part * per, (part + 1) * per, *buffers.buffers.back());
  if (buffers.release_source) {
    buffers.release_source({whole.data, whole.data_bytes()});
    if (whole.scale != nullptr) buffers.release_source({whole.scale, whole.scale_bytes()});
  }
}

// An expert (or the shared expert) split along its intermediate dimension.
void split_expert(ExpertWeights& e, const ShardPlan& p, ShardBuffers& buffers) {
  keep_rows(e.w1.weight, p.rank, p.size);
  keep_rows(e.w3.weight, p.rank, p.size);
  keep_columns(e.w2.weight, p.rank, p.size, buffers);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("--tensor-parallel-size: {}", what);
}

}  // namespace

void for_each_matrix(const BlockWeights& b, const std::function<void(const WeightMatrix&)>& f) {
  f(b.hc_attn.fn);
  f(b.hc_ffn.fn);
  const AttentionWeights& a = b.attn;
  for (const Linear* l : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b}) f(l->weight);
  if (a.compressor) {
    f(a.compressor->wkv.weight);
    f(a.compressor->wgate.weight);
  }
  if (a.indexer) {
    f(a.indexer->wq_b.weight);
    f(a.indexer->weights_proj.weight);
    f(a.indexer->compressor.wkv.weight);
    f(a.indexer->compressor.wgate.weight);
  }
  f(b.ffn.gate);
  for (const ExpertWeights& e : b.ffn.experts) {
    for (const Linear* l : {&e.w1, &e.w2, &e.w3}) f(l->weight);
  }
  for (const Linear* l : {&b.ffn.shared.w1, &b.ffn.shared.w2, &b.ffn.shared.w3}) f(l->weight);
}

void for_each_matrix(const TargetWeights& w, const std::function<void(const WeightMatrix&)>& f) {
  f(w.head);
  f(w.hc_head.fn);
  for (const BlockWeights& b : w.layers) for_each_matrix(b, f);
  // The embedding is replicated and read a row per token: never touched as a whole.
}

uint64_t ShardBuffers::bytes() const {
  uint64_t n = 0;
  for (const auto& b : buffers) n += b->size();
  return n;
}

void check_shardable(const Config& c, const ShardPlan& p) {
  const int n = p.size;
  if (n <= 1) return;
  auto divides = [&](int64_t value, const char* field) {
    require(value % n == 0, fmt::format("{} ways does not divide {} = {}", n, field, value));
  };
  divides(c.num_attention_heads, "num_attention_heads");
  divides(c.o_groups, "o_groups");
  divides(c.index_n_heads, "index_n_heads");
  divides(c.vocab_size, "vocab_size");
  // FP8 weights are cut on their 128 x 128 scale blocks, FP4 on their 32-column scales.
  auto blocks = [&](int64_t value, int64_t block, const char* field) {
    require(value % (int64_t{n} * block) == 0,
            fmt::format("{} = {} does not split {} ways on blocks of {} (the FP8/FP4 scales)",
                        field, value, n, block));
  };
  blocks(c.num_attention_heads * c.head_dim, 128, "num_attention_heads * head_dim");
  blocks(c.o_groups * c.o_lora_rank, 128, "o_groups * o_lora_rank");
  blocks(c.index_n_heads * c.index_head_dim, 128, "index_n_heads * index_head_dim");
  blocks(c.moe_intermediate_size * c.n_shared_experts, 128,
         "moe_intermediate_size * n_shared_experts");
  if (p.expert_parallel) {
    divides(c.n_routed_experts, "n_routed_experts (--enable-expert-parallel)");
  } else {
    blocks(c.moe_intermediate_size, 128, "moe_intermediate_size");
  }
}

void shard_block(BlockWeights& w, const Config& c, const ShardPlan& p, ShardBuffers& buffers) {
  if (p.size <= 1) return;
  AttentionWeights& a = w.attn;
  const int64_t heads = c.num_attention_heads / p.size;
  keep_rows(a.wq_b.weight, p.rank, p.size);
  a.attn_sink =
      Vec(a.attn_sink.begin() + p.rank * heads, a.attn_sink.begin() + (p.rank + 1) * heads);
  keep_rows(a.wo_a.weight, p.rank, p.size);
  keep_columns(a.wo_b.weight, p.rank, p.size, buffers);
  if (a.indexer) {
    keep_rows(a.indexer->wq_b.weight, p.rank, p.size);
    keep_rows(a.indexer->weights_proj.weight, p.rank, p.size);
  }
  MoEWeights& m = w.ffn;
  split_expert(m.shared, p, buffers);
  const int64_t E = static_cast<int64_t>(m.experts.size());
  for (int64_t e = 0; e < E; ++e) {
    ExpertWeights& x = m.experts[static_cast<size_t>(e)];
    if (!p.expert_parallel) {
      split_expert(x, p, buffers);
    } else if (e * p.size / E != p.rank) {
      x = ExpertWeights{};  // another rank's: empty, skipped by moe_forward
    }
  }
}

void shard_target(TargetWeights& w, const Config& c, const ShardPlan& p, ShardBuffers& buffers) {
  if (p.size <= 1) return;
  check_shardable(c, p);
  for (BlockWeights& b : w.layers) shard_block(b, c, p, buffers);
  keep_rows(w.head, p.rank, p.size);
}

uint64_t weight_bytes(const TargetWeights& w) {
  uint64_t n = 0;
  for_each_matrix(w, [&](const WeightMatrix& m) {
    if (!m.empty()) n += m.nbytes();
  });
  return n;
}

void touch_pages(const WeightMatrix& m) {
  if (m.empty()) return;
  volatile uint8_t sink = 0;
  auto touch = [&](const std::byte* p, uint64_t n) {
    for (uint64_t i = 0; i < n; i += 4096) sink = sink + static_cast<uint8_t>(p[i]);
  };
  touch(m.data, m.data_bytes());
  if (m.scale != nullptr) touch(m.scale, m.scale_bytes());
}

void check_kept_scales(const WeightMatrix& m, const LoadedParams& params, int rank) {
  if (m.empty() || m.scale == nullptr || m.scale_dtype != DType::F8_E8M0) return;
  const auto* s = reinterpret_cast<const uint8_t*>(m.scale);
  for (uint64_t i = 0; i < m.scale_bytes(); ++i) {
    if (s[i] != 0xFF) continue;
    const std::string name = params.name_of(m.scale);
    throw Error("{}: an E8M0 scale is 0xFF (NaN) in the part rank {} keeps",
                name.empty() ? "a column slice copied by sharding" : name, rank);
  }
}

}  // namespace flint::dsv4
