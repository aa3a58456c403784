#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "base/hash.h"
#include "formats/bf16.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/hyper_connections.h"

namespace flint::dsv4 {

Model::Model(Config config, std::shared_ptr<const LoadedParams> params)
    : config_(std::move(config)), params_(std::move(params)) {
  bind(*params_, config_, &weights_);
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i)
    ropes_.push_back(layer_rope(config_, config_.compress_ratio(i)));
  const std::string json = config_to_json(config_).dump();
  identity_ = hash64(json.data(), json.size());
  for (const char* name : {"embed.weight", "head.weight", "norm.weight"}) {
    if (const LoadedParam* p = params_->find(name)) {
      const size_t n = std::min<size_t>(p->bytes.size(), 1 << 16);
      identity_ = hash64(p->bytes.data(), n, identity_);
    }
  }
}

std::vector<float> Model::forward(std::span<const ForwardRequest> batch, QuantSimulation sim,
                                  ForwardTrace* trace) const {
  const Config& c = config_;
  const int64_t H = c.hidden_size, hc = c.hc_mult, V = c.vocab_size;

  // Gather the batch's tokens; validate before touching any state.
  std::vector<int32_t> tokens;
  std::vector<Segment> segments;
  for (const auto& req : batch) {
    FLINT_CHECK(req.state != nullptr && req.state->num_layers() == c.num_hidden_layers);
    for (int32_t t : req.tokens) {
      if (t < 0 || t >= V) throw Error("token id {} is outside the vocabulary [0, {})", t, V);
    }
    segments.push_back({nullptr, static_cast<int64_t>(tokens.size()),
                        static_cast<int64_t>(req.tokens.size()), req.state->length()});
    tokens.insert(tokens.end(), req.tokens.begin(), req.tokens.end());
  }
  const int64_t n = static_cast<int64_t>(tokens.size());

  // Embedding, copied into every stream.
  std::vector<float> streams(static_cast<size_t>(n * hc * H));
  std::vector<float> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < n; ++t) {
    weights_.embed.dequantize_rows(tokens[static_cast<size_t>(t)],
                                   tokens[static_cast<size_t>(t)] + 1, row.data());
    for (int64_t k = 0; k < hc; ++k)
      std::memcpy(&streams[static_cast<size_t>((t * hc + k) * H)], row.data(), H * sizeof(float));
  }

  for (size_t i = 0; i < batch.size(); ++i) {
    if (KvUndo* undo = batch[i].undo) {
      undo->length0 = batch[i].state->length();
      undo->n = static_cast<int64_t>(batch[i].tokens.size());
      undo->layers.assign(static_cast<size_t>(c.num_hidden_layers), {});
    }
  }
  // The rows the trace keeps (each request's last `last_rows`, or all).
  std::vector<int64_t> captured;
  const int64_t n_means = trace != nullptr ? static_cast<int64_t>(trace->mean_of_layers.size()) : 0;
  if (trace != nullptr) {
    trace->streams_in.clear();
    trace->first_token.clear();
    trace->first_row.clear();
    for (const Segment& s : segments) {
      const int64_t skip = trace->last_rows > 0 ? std::max<int64_t>(0, s.n - trace->last_rows) : 0;
      trace->first_token.push_back(skip);
      trace->first_row.push_back(static_cast<int64_t>(captured.size()));
      for (int64_t t = skip; t < s.n; ++t) captured.push_back(s.row + t);
    }
    trace->layer_means.assign(captured.size() * static_cast<size_t>(n_means * H), 0.0f);
  }
  const int64_t n_captured = static_cast<int64_t>(captured.size());
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (trace != nullptr && trace->record_layers) trace->streams_in.push_back(streams);
    for (size_t i = 0; i < batch.size(); ++i) {
      segments[i].state = &batch[i].state->layer(layer);
      segments[i].undo =
          batch[i].undo ? &batch[i].undo->layers[static_cast<size_t>(layer)] : nullptr;
    }
    block_forward(weights_.layers[static_cast<size_t>(layer)], c,
                  ropes_[static_cast<size_t>(layer)], segments, tokens.data(), streams.data(), n,
                  sim, parallel_.comm);
    for (int64_t k = 0; k < n_means; ++k) {
      if (trace->mean_of_layers[static_cast<size_t>(k)] != layer) continue;
      for (int64_t r = 0; r < n_captured; ++r) {
        const int64_t t = captured[static_cast<size_t>(r)];
        float* out = &trace->layer_means[static_cast<size_t>((r * n_means + k) * H)];
        for (int64_t j = 0; j < hc; ++j) {
          const float* src = &streams[static_cast<size_t>((t * hc + j) * H)];
          for (int64_t d = 0; d < H; ++d) out[d] += src[d];
        }
        for (int64_t d = 0; d < H; ++d) out[d] /= static_cast<float>(hc);
      }
    }
  }
  for (const auto& req : batch) req.state->advance(static_cast<int64_t>(req.tokens.size()));
  if (trace != nullptr) {
    trace->final_streams.resize(static_cast<size_t>(n_captured * hc * H));
    for (int64_t r = 0; r < n_captured; ++r) {
      std::memcpy(&trace->final_streams[static_cast<size_t>(r * hc * H)],
                  &streams[static_cast<size_t>(captured[static_cast<size_t>(r)] * hc * H)],
                  static_cast<size_t>(hc * H) * sizeof(float));
    }
  }

  // Only the rows whose logits are wanted go through hc_head, norm and head.
  std::vector<int64_t> rows;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Segment& s = segments[i];
    if (s.n == 0) continue;
    if (batch[i].all_logits) {
      for (int64_t t = 0; t < s.n; ++t) rows.push_back(s.row + t);
    } else {
      rows.push_back(s.row + s.n - 1);
    }
  }
  const int64_t m = static_cast<int64_t>(rows.size());
  std::vector<float> picked(static_cast<size_t>(m * hc * H));
  for (int64_t r = 0; r < m; ++r) {
    std::memcpy(&picked[static_cast<size_t>(r * hc * H)],
                &streams[static_cast<size_t>(rows[static_cast<size_t>(r)] * hc * H)],
                static_cast<size_t>(hc * H) * sizeof(float));
  }
  std::vector<float> x(static_cast<size_t>(m * H));
  hc_head(weights_.hc_head, c, picked.data(), m, x.data());
  kernels::rms_norm(x.data(), weights_.norm.data(), m, H, static_cast<float>(c.rms_norm_eps),
                    x.data());
  return head_logits(x.data(), m);
}

std::vector<float> Model::head_logits(float* x, int64_t m) const {
  const int64_t V = config_.vocab_size;
  const int ranks = comm_size(parallel_.comm);
  std::vector<float> logits(static_cast<size_t>(m * V));
  if (ranks == 1) {
    kernels::matmul(weights_.head, x, m, logits.data());
    return logits;
  }
  // Each rank has the head's rows of its vocabulary slice: gather [rank][m][V / ranks] and
  // interleave into rows of the whole vocabulary.
  const int64_t part = weights_.head.rows;
  std::vector<float> mine(static_cast<size_t>(m * part)), all(static_cast<size_t>(m * V));
  kernels::matmul(weights_.head, x, m, mine.data());
  parallel_.comm->all_gather(mine.data(), mine.size(), all.data(), "logits");
  for (int r = 0; r < ranks; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&logits[static_cast<size_t>(i * V + r * part)],
                  &all[static_cast<size_t>((r * m + i) * part)],
                  static_cast<size_t>(part) * sizeof(float));
    }
  }
  return logits;
}

ShardPlan Model::begin_sharding(const ModelParallel& parallel, ShardBuffers& buffers) const {
  // Columns copied out of the checkpoint: their pages (both ranks' halves, read to copy)
  // leave this rank's resident memory.
  if (checkpoint_) {
    buffers.release_source = [this](std::span<const std::byte> range) {
      for (const auto& f : checkpoint_->files())
        if (f->mapping().release(range)) return;
    };
  }
  return {comm_rank(parallel.comm), comm_size(parallel.comm), parallel.expert_parallel};
}

void Model::distribute(const ModelParallel& parallel) {
  const ShardPlan plan = begin_sharding(parallel, shard_buffers_);
  shard_target(weights_, config_, plan, shard_buffers_);
  shard_buffers_.release_source = nullptr;
  parallel_ = parallel;
  for_each_matrix(weights_, [&](const WeightMatrix& m) {
    touch_pages(m);
    check_kept_scales(m, *params_, plan.rank);
  });
}

void Model::distribute_draft(std::span<BlockWeights* const> blocks, const LoadedParams& params,
                             ShardBuffers& buffers) const {
  if (comm_size(parallel_.comm) <= 1) return;
  const ShardPlan plan = begin_sharding(parallel_, buffers);
  for (BlockWeights* b : blocks) {
    shard_block(*b, config_, plan, buffers);
    for_each_matrix(*b, [&](const WeightMatrix& m) {
      touch_pages(m);
      check_kept_scales(m, params, plan.rank);
    });
  }
  buffers.release_source = nullptr;
}

LoadOptions Model::draft_load_options(LoadOptions options) const {
  if (comm_size(parallel_.comm) > 1) {
    options.read_pages = false;  // distribute_draft reads the rank's part
    options.check_scales = false;
  }
  return options;
}

void Model::rollback(SequenceKv& state, const KvUndo& undo, int64_t keep,
                     QuantSimulation sim) const {
  FLINT_CHECK(keep >= 0 && keep <= undo.n && state.length() == undo.length0 + undo.n);
  if (keep == undo.n) return;
  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    attention_rollback(weights_.layers[static_cast<size_t>(layer)].attn, config_,
                       ropes_[static_cast<size_t>(layer)], state.layer(layer),
                       undo.layers[static_cast<size_t>(layer)], keep, sim);
  }
  state.truncate(undo.length0 + keep);
}

LoadedComponent load_component(const std::shared_ptr<const Checkpoint>& checkpoint,
                               const Config& config, Component component,
                               const LoadOptions& options) {
  ParamRegistry registry = declare(component, config);
  auto params = std::make_shared<LoadedParams>();
  LoadedComponent out;
  out.report = load_params(checkpoint, registry, options, params.get());
  out.params = std::move(params);
  return out;
}

std::unique_ptr<Model> load_model(const std::filesystem::path& dir, const LoadOptions& options,
                                  const ModelParallel& parallel) {
  Config config = load_config(dir);
  const bool sharded = comm_size(parallel.comm) > 1;
  if (sharded) {
    check_shardable(config,
                    {comm_rank(parallel.comm), comm_size(parallel.comm), parallel.expert_parallel});
  }
  auto checkpoint = std::make_shared<const Checkpoint>(Checkpoint::open(dir));
  // A rank reads only its part: the pages are read after sharding (Model::distribute),
  // without readahead, which would map the neighbouring rows of the other ranks too.
  LoadOptions load = options;
  if (sharded) {
    load.read_pages = false;
    load.check_scales = false;  // the rank checks its own (Model::distribute)
    for (const auto& f : checkpoint->files()) f->mapping().read_touched_pages_only();
  }
  LoadedComponent target = load_component(checkpoint, config, Component::kTarget, load);
  check_load_report(target.report);
  auto model = std::make_unique<Model>(std::move(config), target.params);
  model->set_checkpoint(std::move(checkpoint));
  if (sharded) model->distribute(parallel);
  return model;
}

}  // namespace flint::dsv4
