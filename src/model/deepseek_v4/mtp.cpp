#include "model/deepseek_v4/mtp.h"

#include <cstring>

#include "base/check.h"
#include "base/error.h"
#include "kernels/norm.h"
#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/hyper_connections.h"

namespace flint::dsv4 {

MtpDraft::MtpDraft(const Model& target, std::shared_ptr<const LoadedParams> params)
    : target_(target), params_(std::move(params)), layer_id_(target.config().num_hidden_layers) {
  const Config& c = target.config();
  std::vector<MtpWeights> layers;
  bind(*params_, c, &layers);
  FLINT_CHECK(!layers.empty());
  weights_ = std::move(layers.front());
  BlockWeights* blocks[] = {&weights_.block};
  target.distribute_draft(blocks, *params_, buffers_);
  rope_ = layer_rope(c, c.compress_ratio(layer_id_));
}

std::unique_ptr<SequenceState> MtpDraft::new_state(kernels::KvDtype dtype,
                                                   int64_t extra_window) const {
  const int64_t ids[] = {layer_id_};
  return std::make_unique<SequenceState>(target_.config(), ids, dtype, extra_window);
}

std::vector<float> MtpDraft::forward(std::span<const MtpInput> batch, QuantSimulation sim,
                                     std::vector<float>* last_streams) const {
  const Config& c = target_.config();
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<int32_t> tokens;
  std::vector<Segment> segments;
  std::vector<float> h;
  for (const MtpInput& in : batch) {
    FLINT_CHECK(in.state != nullptr && in.state->num_layers() == 1);
    segments.push_back({&in.state->layer(0), static_cast<int64_t>(tokens.size()),
                        static_cast<int64_t>(in.tokens.size()), in.state->length()});
    tokens.insert(tokens.end(), in.tokens.begin(), in.tokens.end());
    h.insert(h.end(), in.hidden, in.hidden + static_cast<int64_t>(in.tokens.size()) * hc * H);
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  // e = e_proj(enorm(embed(x))), one per token; h = h_proj(hnorm(h)), one per stream.
  std::vector<float> e(static_cast<size_t>(n * H)), eo(e.size());
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = tokens[static_cast<size_t>(t)];
    weights_.embed.dequantize_rows(id, id + 1, &e[static_cast<size_t>(t * H)]);
  }
  kernels::rms_norm(e.data(), weights_.enorm.data(), n, H, eps, e.data());
  weights_.e_proj.forward(e.data(), n, eo.data(), sim);
  kernels::rms_norm(h.data(), weights_.hnorm.data(), n * hc, H, eps, h.data());
  std::vector<float> streams(h.size());
  weights_.h_proj.forward(h.data(), n * hc, streams.data(), sim);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < hc; ++k) {
      float* s = &streams[static_cast<size_t>((t * hc + k) * H)];
      const float* ev = &eo[static_cast<size_t>(t * H)];
      for (int64_t d = 0; d < H; ++d) s[d] += ev[d];
    }
  }
  block_forward(weights_.block, c, rope_, segments, tokens.data(), streams.data(), n, sim,
                target_.comm());
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i].state->advance(static_cast<int64_t>(batch[i].tokens.size()));

  // Only the last row of each input that wants it goes through the head.
  std::vector<float> picked;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Segment& s = segments[i];
    if (!batch[i].logits || s.n == 0) continue;
    const auto at = streams.begin() + (s.row + s.n - 1) * hc * H;
    picked.insert(picked.end(), at, at + hc * H);
  }
  const int64_t m = static_cast<int64_t>(picked.size()) / (hc * H);
  std::vector<float> x(static_cast<size_t>(m * H));
  hc_head(weights_.hc_head, c, picked.data(), m, x.data());
  kernels::rms_norm(x.data(), weights_.norm.data(), m, H, eps, x.data());
  if (last_streams != nullptr) *last_streams = std::move(picked);
  return target_.head_logits(x.data(), m);
}

std::unique_ptr<MtpDraft> load_mtp(const Model& target, const LoadOptions& options) {
  const Config& c = target.config();
  if (c.num_nextn_predict_layers < 1 || c.dspark) {
    throw Error(
        "the checkpoint has no MTP layer (num_nextn_predict_layers is {}{}): speculative method "
        "mtp needs DeepSeek-V4's mtp.0 layer; use method ngram{}",
        c.num_nextn_predict_layers, c.dspark ? ", and its mtp.* layers are DSpark stages" : "",
        c.dspark ? " or dspark" : "");
  }
  if (c.compress_ratio(c.num_hidden_layers) != 0) {
    throw Error(
        "config.json: the MTP layer's compress ratio is {}; flint drafts only with "
        "window-only MTP layers (ratio 0, as DeepSeek-V4 ships them)",
        c.compress_ratio(c.num_hidden_layers));
  }
  FLINT_CHECK(target.checkpoint() != nullptr, "the target was not loaded from a checkpoint");
  LoadedComponent mtp =
      load_component(target.checkpoint(), c, Component::kMtp, target.draft_load_options(options));
  check_load_report(mtp.report);
  return std::make_unique<MtpDraft>(target, mtp.params);
}

}  // namespace flint::dsv4
