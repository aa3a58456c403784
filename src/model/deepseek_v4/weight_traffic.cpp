#include "model/deepseek_v4/weight_traffic.h"

#include <cmath>

namespace flint::dsv4 {
namespace {

// Sums `of(matrix)` over the matrices of one part of the model.
template <typename Of>
double compressor_sum(const CompressorWeights& c, Of of) {
  return of(c.wkv.weight) + of(c.wgate.weight);
}

template <typename Of>
double attention_sum(const AttentionWeights& a, Of of) {
  double b = 0;
  for (const Linear* l : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b}) b += of(l->weight);
  if (a.compressor) b += compressor_sum(*a.compressor, of);
  if (a.indexer) {
    b += of(a.indexer->wq_b.weight) + of(a.indexer->weights_proj.weight);
    b += compressor_sum(a.indexer->compressor, of);
  }
  return b;
}

template <typename Of>
double expert_sum(const ExpertWeights& e, Of of) {
  return of(e.w1.weight) + of(e.w2.weight) + of(e.w3.weight);
}

double bytes_of(const WeightMatrix& m) { return static_cast<double>(m.nbytes()); }
double elements_of(const WeightMatrix& m) { return static_cast<double>(m.rows * m.cols); }

}  // namespace

double decode_weight_bytes(const TargetWeights& w, const Config& c, int64_t tokens) {
  const double t = static_cast<double>(tokens);
  double bytes = t * bytes_of(w.embed) / static_cast<double>(w.embed.rows);
  bytes += bytes_of(w.hc_head.fn) + bytes_of(w.head);
  for (const BlockWeights& b : w.layers) {
    bytes += bytes_of(b.hc_attn.fn) + bytes_of(b.hc_ffn.fn);
    bytes += attention_sum(b.attn, bytes_of);
    bytes += bytes_of(b.ffn.gate) + expert_sum(b.ffn.shared, bytes_of);
    const auto experts = static_cast<double>(b.ffn.experts.size());
    if (experts == 0) continue;
    double all = 0;
    for (const ExpertWeights& e : b.ffn.experts) all += expert_sum(e, bytes_of);
    const double k = static_cast<double>(c.num_experts_per_tok);
    const double distinct = experts * (1.0 - std::pow(1.0 - k / experts, t));
    bytes += distinct * all / experts;
  }
  return bytes;
}

double prefill_matmul_flops_per_token(const TargetWeights& w, const Config& c) {
  double macs = elements_of(w.hc_head.fn);
  for (const BlockWeights& b : w.layers) {
    macs += elements_of(b.hc_attn.fn) + elements_of(b.hc_ffn.fn);
    macs += attention_sum(b.attn, elements_of);
    macs += elements_of(b.ffn.gate) + expert_sum(b.ffn.shared, elements_of);
    if (b.ffn.experts.empty()) continue;
    double all = 0;
    for (const ExpertWeights& e : b.ffn.experts) all += expert_sum(e, elements_of);
    macs += static_cast<double>(c.num_experts_per_tok) * all /
            static_cast<double>(b.ffn.experts.size());
  }
  return 2 * macs;
}

}  // namespace flint::dsv4
