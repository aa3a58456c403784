#include "model/deepseek_v4/dspark.h"

#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/error.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/hyper_connections.h"

namespace flint::dsv4 {

DSparkDraft::DSparkDraft(const Model& target, std::shared_ptr<const LoadedParams> params)
    : target_(target), params_(std::move(params)) {
  const Config& c = target.config();
  bind(*params_, c, &weights_);
  std::vector<BlockWeights*> blocks;
  for (BlockWeights& b : weights_.stages) blocks.push_back(&b);
  target.distribute_draft(blocks, *params_, buffers_);
  for (int64_t s = 0; s < static_cast<int64_t>(weights_.stages.size()); ++s)
    ropes_.push_back(layer_rope(c, c.compress_ratio(c.num_hidden_layers + s)));
}

std::unique_ptr<SequenceState> DSparkDraft::new_state(kernels::KvDtype dtype) const {
  const Config& c = target_.config();
  std::vector<int64_t> ids;
  for (int64_t s = 0; s < static_cast<int64_t>(weights_.stages.size()); ++s)
    ids.push_back(c.num_hidden_layers + s);
  return std::make_unique<SequenceState>(c, ids, dtype, 0);
}

void DSparkDraft::add_context(std::span<const DSparkContextInput> batch,
                              QuantSimulation sim) const {
  const Config& c = target_.config();
  const int64_t H = c.hidden_size;
  std::vector<float> x, rows;
  for (const DSparkContextInput& in : batch) {
    if (in.n == 0) continue;
    x.resize(static_cast<size_t>(in.n * H));
    weights_.main_proj.forward(in.features, in.n, x.data(), sim);
    kernels::rms_norm(x.data(), weights_.main_norm.data(), in.n, H,
                      static_cast<float>(c.rms_norm_eps), x.data());
    rows.resize(static_cast<size_t>(in.n * c.head_dim));
    const int64_t pos0 = in.state->length();
    for (size_t s = 0; s < weights_.stages.size(); ++s) {
      LayerKv& store = in.state->layer(static_cast<int64_t>(s));
      attention_kv_rows(weights_.stages[s].attn, c, ropes_[s], store, x.data(), in.n, pos0,
                        rows.data(), sim);
      store.write_window(pos0, in.n, rows.data());
    }
    in.state->advance(in.n);
  }
}

DSparkBlockOutput DSparkDraft::block(std::span<const DSparkBlockInput> batch,
                                     QuantSimulation sim) const {
  const Config& c = target_.config();
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  std::vector<int32_t> tokens;
  std::vector<Segment> segments;
  for (const DSparkBlockInput& in : batch) {
    FLINT_CHECK(in.n >= 1 && in.n <= config().block_size);
    Segment seg;
    seg.row = static_cast<int64_t>(tokens.size());
    seg.n = in.n;
    seg.pos0 = in.state->length();
    seg.block = true;
    segments.push_back(seg);
    tokens.push_back(in.anchor);
    for (int64_t k = 1; k < in.n; ++k)
      tokens.push_back(static_cast<int32_t>(config().noise_token_id));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<float> streams(static_cast<size_t>(n * hc * H)), row(static_cast<size_t>(H));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    weights_.embed.dequantize_rows(id, id + 1, row.data());
    for (int64_t k = 0; k < hc; ++k)
      std::memcpy(&streams[static_cast<size_t>((t * hc + k) * H)], row.data(),
                  static_cast<size_t>(H) * sizeof(float));
  }
  for (size_t s = 0; s < weights_.stages.size(); ++s) {
    for (size_t i = 0; i < batch.size(); ++i)
      segments[i].state = &batch[i].state->layer(static_cast<int64_t>(s));
    block_forward(weights_.stages[s], c, ropes_[s], segments, tokens.data(), streams.data(), n, sim,
                  target_.comm());
  }
  DSparkBlockOutput out;
  out.hidden.resize(static_cast<size_t>(n * H));
  hc_head(weights_.hc_head, c, streams.data(), n, out.hidden.data());
  std::vector<float> x = out.hidden;
  kernels::rms_norm(x.data(), weights_.norm.data(), n, H, static_cast<float>(c.rms_norm_eps),
                    x.data());
  out.logits = target_.head_logits(x.data(), n);
  return out;
}

void DSparkDraft::add_markov(int32_t prev, float* z) const {
  const int64_t r = weights_.markov_w1.cols, V = weights_.markov_w2.rows;
  std::vector<float> w1(static_cast<size_t>(r)), bias(static_cast<size_t>(V));
  weights_.markov_w1.dequantize_rows(prev, prev + 1, w1.data());
  kernels::matmul(weights_.markov_w2, w1.data(), 1, bias.data());
  for (int64_t v = 0; v < V; ++v) z[v] += bias[static_cast<size_t>(v)];
}

float DSparkDraft::confidence(const float* h, int32_t prev) const {
  const int64_t H = target_.config().hidden_size, r = weights_.markov_w1.cols;
  std::vector<float> feat(static_cast<size_t>(H + r));
  std::memcpy(feat.data(), h, static_cast<size_t>(H) * sizeof(float));
  weights_.markov_w1.dequantize_rows(prev, prev + 1, feat.data() + H);
  float logit = 0.0f;
  kernels::matmul(weights_.confidence, feat.data(), 1, &logit);
  return 1.0f / (1.0f + std::exp(-logit));
}

std::unique_ptr<DSparkDraft> load_dspark(const Model& target, const LoadOptions& options) {
  const Config& c = target.config();
  if (!c.dspark) {
    throw Error(
        "the checkpoint has no DSpark stages (config.json has no dspark_block_size; "
        "DeepSeek-V4-Flash-0731 has them): use speculative method mtp or ngram");
  }
  for (int64_t s = 0; s < c.num_nextn_predict_layers; ++s) {
    if (c.compress_ratio(c.num_hidden_layers + s) != 0) {
      throw Error(
          "config.json: DSpark stage {} has compress ratio {}; DSpark stages are "
          "window-only (ratio 0)",
          s, c.compress_ratio(c.num_hidden_layers + s));
    }
  }
  for (int64_t id : c.dspark->target_layer_ids) {
    if (id < 0 || id >= c.num_hidden_layers) {
      throw Error("config.json: dspark_target_layer_ids has {}, outside the {} layers", id,
                  c.num_hidden_layers);
    }
  }
  FLINT_CHECK(target.checkpoint() != nullptr, "the target was not loaded from a checkpoint");
  LoadedComponent d = load_component(target.checkpoint(), c, Component::kDSpark,
                                     target.draft_load_options(options));
  check_load_report(d.report);
  return std::make_unique<DSparkDraft>(target, d.params);
}

}  // namespace flint::dsv4
