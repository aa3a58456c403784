#include "model/deepseek_v4/weight_traffic.h"

#include <cmath>

namespace flint::dsv4 {
namespace {

double compressor_bytes(const CompressorWeights& c) {
  return static_cast<double>(c.wkv.weight.nbytes() + c.wgate.weight.nbytes());
}

double attention_bytes(const AttentionWeights& a) {
  double b = 0;
  for (const Linear* l : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b})
    b += static_cast<double>(l->weight.nbytes());
  if (a.compressor) b += compressor_bytes(*a.compressor);
  if (a.indexer) {
    b += static_cast<double>(a.indexer->wq_b.weight.nbytes() +
                             a.indexer->weights_proj.weight.nbytes());
    b += compressor_bytes(a.indexer->compressor);
  }
  return b;
}

double expert_bytes(const ExpertWeights& e) {
  return static_cast<double>(e.w1.weight.nbytes() + e.w2.weight.nbytes() + e.w3.weight.nbytes());
}

}  // namespace

double decode_weight_bytes(const TargetWeights& w, const Config& c, int64_t tokens) {
  const double t = static_cast<double>(tokens);
  double bytes = t * static_cast<double>(w.embed.nbytes()) / static_cast<double>(w.embed.rows);
  bytes += static_cast<double>(w.hc_head.fn.nbytes() + w.head.nbytes());
  for (const BlockWeights& b : w.layers) {
    bytes += static_cast<double>(b.hc_attn.fn.nbytes() + b.hc_ffn.fn.nbytes());
    bytes += attention_bytes(b.attn);
    bytes += static_cast<double>(b.ffn.gate.nbytes()) + expert_bytes(b.ffn.shared);
    const auto experts = static_cast<double>(b.ffn.experts.size());
    if (experts == 0) continue;
    double all = 0;
    for (const ExpertWeights& e : b.ffn.experts) all += expert_bytes(e);
    const double k = static_cast<double>(c.num_experts_per_tok);
    const double distinct = experts * (1.0 - std::pow(1.0 - k / experts, t));
    bytes += distinct * all / experts;
  }
  return bytes;
}

}  // namespace flint::dsv4
