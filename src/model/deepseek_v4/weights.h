// Typed views of DeepSeek-V4 weights: one struct per module, filled by visit_*() in
// params.cpp. Matrices are WeightMatrix views into the checkpoint's mmap; small vectors
// (norm weights, biases, sinks, hyper-connection bases) are float32 copies.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "formats/weight.h"
#include "model/linear.h"

namespace flint::dsv4 {

using Vec = std::vector<float>;

// hc_pre parameters of one sub-layer: fn [(2 + hc) * hc, hc * H] (F32), base, scale [3].
struct HyperConnWeights {
  WeightMatrix fn;
  Vec base;
  Vec scale;
};

// The final reduction of the hc streams: fn [hc, hc * H], base [hc], scale [1].
struct HcHeadWeights {
  WeightMatrix fn;
  Vec base;
  Vec scale;
};

struct CompressorWeights {
  int64_t ratio = 0;
  int64_t head_dim = 0;  // width of one compressed entry
  bool overlap = false;  // ratio 4: two interleaved windows, projections are 2 * head_dim wide
  Vec ape;               // [ratio, coff * head_dim], added to the gate scores
  Linear wkv;            // [coff * head_dim, H], BF16, no input rounding
  Linear wgate;          // [coff * head_dim, H], BF16, no input rounding
  Vec norm;              // [head_dim]
};

struct IndexerWeights {
  Linear wq_b;          // [index_heads * index_head_dim, q_lora_rank]
  Linear weights_proj;  // [index_heads, H], BF16
  CompressorWeights compressor;
};

struct AttentionWeights {
  int64_t compress_ratio = 0;
  Vec attn_sink;  // [heads]
  Linear wq_a;    // [q_lora_rank, H]
  Vec q_norm;     // [q_lora_rank]
  Linear wq_b;    // [heads * head_dim, q_lora_rank]
  Linear wkv;     // [head_dim, H]
  Vec kv_norm;    // [head_dim]
  Linear wo_a;    // [o_groups * o_lora_rank, heads * head_dim / o_groups]: group g uses rows
                  // [g * o_lora_rank, (g + 1) * o_lora_rank)
  Linear wo_b;    // [H, o_groups * o_lora_rank]
  std::optional<CompressorWeights> compressor;  // ratio > 0
  std::optional<IndexerWeights> indexer;        // ratio 4
};

struct ExpertWeights {
  Linear w1;  // gate [inter, H]
  Linear w2;  // down [H, inter]
  Linear w3;  // up [inter, H]
};

struct MoEWeights {
  WeightMatrix gate;                 // [experts, H], BF16
  Vec bias;                          // [experts], selection only; empty on hash layers
  const int64_t* tid2eid = nullptr;  // [vocab, top_k] on hash layers
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
};

struct BlockWeights {
  int64_t layer_id = 0;  // index into compress_ratios; decides hash routing
  Vec attn_norm;
  Vec ffn_norm;
  HyperConnWeights hc_attn;
  HyperConnWeights hc_ffn;
  AttentionWeights attn;
  MoEWeights ffn;
};

struct TargetWeights {
  WeightMatrix embed;  // [vocab, H], BF16
  std::vector<BlockWeights> layers;
  HcHeadWeights hc_head;
  Vec norm;           // [H]
  WeightMatrix head;  // [vocab, H], BF16
};

// DeepSeek-V4's MTP layer mtp.i: a block fed by e_proj(enorm(embed(token))) +
// h_proj(hnorm(previous hidden streams)), with its own hc_head and norm; embed and head are
// the target's.
struct MtpWeights {
  WeightMatrix embed;  // the target's, shared
  WeightMatrix head;   // the target's, shared
  BlockWeights block;
  Linear e_proj;  // [H, H]
  Linear h_proj;  // [H, H]
  Vec enorm;
  Vec hnorm;
  Vec norm;
  HcHeadWeights hc_head;
};

// Flash-0731's DSpark draft: stages mtp.0..n-1 (full blocks); stage 0 holds main_proj and
// main_norm; the last stage holds norm, hc_head, the Markov head and the confidence head.
struct DSparkWeights {
  WeightMatrix embed;  // the target's, shared
  WeightMatrix head;   // the target's, shared
  std::vector<BlockWeights> stages;
  Linear main_proj;  // [H, n_targets * H]
  Vec main_norm;     // [H]
  Vec norm;          // [H]
  HcHeadWeights hc_head;
  WeightMatrix markov_w1;   // [vocab, rank], BF16
  WeightMatrix markov_w2;   // [vocab, rank], BF16
  WeightMatrix confidence;  // [1, H + rank], BF16
};

}  // namespace flint::dsv4
