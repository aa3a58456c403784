#include "model/deepseek_v4/params.h"

#include <cstring>

#include <fmt/format.h>

#include "base/check.h"
#include "base/error.h"
#include "formats/bf16.h"

namespace flint::dsv4 {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Storage expert_storage(const Config& c) {
  return c.expert_dtype == ExpertDType::kFp4 ? Storage::kFp4 : Storage::kFp8F32Scale;
}

void visit_hc(ParamVisitor& v, HyperConnWeights& w, const Config& c, const std::string& prefix) {
  int64_t mix = (2 + c.hc_mult) * c.hc_mult;
  v.matrix(w.fn, prefix + "_fn", mix, c.hc_mult * c.hidden_size, DType::F32);
  v.vector(w.base, prefix + "_base", {mix}, DType::F32);
  v.vector(w.scale, prefix + "_scale", {3}, DType::F32);
}

void visit_hc_head(ParamVisitor& v, HcHeadWeights& w, const Config& c, const std::string& prefix) {
  v.matrix(w.fn, prefix + "hc_head_fn", c.hc_mult, c.hc_mult * c.hidden_size, DType::F32);
  v.vector(w.base, prefix + "hc_head_base", {c.hc_mult}, DType::F32);
  v.vector(w.scale, prefix + "hc_head_scale", {1}, DType::F32);
}

void visit_compressor(ParamVisitor& v, CompressorWeights& w, const Config& c,
                      const std::string& prefix, int64_t ratio, int64_t head_dim) {
  w.ratio = ratio;
  w.head_dim = head_dim;
  w.overlap = ratio == 4;
  int64_t width = (w.overlap ? 2 : 1) * head_dim;
  v.vector(w.ape, prefix + "ape", {ratio, width}, DType::F32);
  v.linear(w.wkv, prefix + "wkv", width, c.hidden_size, Storage::kBF16, false);
  v.linear(w.wgate, prefix + "wgate", width, c.hidden_size, Storage::kBF16, false);
  v.vector(w.norm, prefix + "norm.weight", {head_dim}, DType::BF16);
}

void visit_attention(ParamVisitor& v, AttentionWeights& w, const Config& c,
                     const std::string& prefix, int64_t ratio) {
  const int64_t heads = c.num_attention_heads;
  w.compress_ratio = ratio;
  v.vector(w.attn_sink, prefix + "attn_sink", {heads}, DType::F32);
  v.linear(w.wq_a, prefix + "wq_a", c.q_lora_rank, c.hidden_size, Storage::kFp8, true);
  v.vector(w.q_norm, prefix + "q_norm.weight", {c.q_lora_rank}, DType::BF16);
  v.linear(w.wq_b, prefix + "wq_b", heads * c.head_dim, c.q_lora_rank, Storage::kFp8, true);
  v.linear(w.wkv, prefix + "wkv", c.head_dim, c.hidden_size, Storage::kFp8, true);
  v.vector(w.kv_norm, prefix + "kv_norm.weight", {c.head_dim}, DType::BF16);
  // The official code dequantises wo_a to BF16 and multiplies without rounding its input.
  v.linear(w.wo_a, prefix + "wo_a", c.o_groups * c.o_lora_rank, heads * c.head_dim / c.o_groups,
           Storage::kFp8, false);
  v.linear(w.wo_b, prefix + "wo_b", c.hidden_size, c.o_groups * c.o_lora_rank, Storage::kFp8, true);
  if (ratio > 0) {
    w.compressor.emplace();
    visit_compressor(v, *w.compressor, c, prefix + "compressor.", ratio, c.head_dim);
  }
  if (ratio == 4) {
    w.indexer.emplace();
    auto& ix = *w.indexer;
    v.linear(ix.wq_b, prefix + "indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank,
             Storage::kFp8, true);
    v.linear(ix.weights_proj, prefix + "indexer.weights_proj", c.index_n_heads, c.hidden_size,
             Storage::kBF16, false);
    visit_compressor(v, ix.compressor, c, prefix + "indexer.compressor.", ratio, c.index_head_dim);
  }
}

void visit_expert(ParamVisitor& v, ExpertWeights& w, const Config& c, const std::string& prefix,
                  Storage storage) {
  v.linear(w.w1, prefix + "w1", c.moe_intermediate_size, c.hidden_size, storage, true);
  v.linear(w.w2, prefix + "w2", c.hidden_size, c.moe_intermediate_size, storage, true);
  v.linear(w.w3, prefix + "w3", c.moe_intermediate_size, c.hidden_size, storage, true);
}

void visit_moe(ParamVisitor& v, MoEWeights& w, const Config& c, const std::string& prefix,
               int64_t layer_id) {
  v.matrix(w.gate, prefix + "gate.weight", c.n_routed_experts, c.hidden_size, DType::BF16);
  if (c.is_hash_layer(layer_id)) {
    v.index_table(w.tid2eid, prefix + "gate.tid2eid", c.vocab_size, c.num_experts_per_tok);
  } else {
    v.vector(w.bias, prefix + "gate.bias", {c.n_routed_experts}, DType::F32);
  }
  w.experts.resize(static_cast<size_t>(c.n_routed_experts));
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    visit_expert(v, w.experts[static_cast<size_t>(e)], c, fmt::format("{}experts.{}.", prefix, e),
                 expert_storage(c));
  }
  visit_expert(v, w.shared, c, prefix + "shared_experts.", Storage::kFp8);
}

}  // namespace

void visit_shared_embed_head(ParamVisitor& v, WeightMatrix& embed, WeightMatrix& head,
                             const Config& c) {
  v.shared_owner = component_name(Component::kTarget);
  v.matrix(embed, "embed.weight", c.vocab_size, c.hidden_size, DType::BF16);
  v.matrix(head, "head.weight", c.vocab_size, c.hidden_size, DType::BF16);
  v.shared_owner.clear();
}

namespace {

// ---- declaring ----

class Declarer final : public ParamVisitor {
 public:
  explicit Declarer(ParamRegistry& registry) : registry_(registry) {}

  void linear(Linear&, const std::string& name, int64_t rows, int64_t cols, Storage storage,
              bool) override {
    switch (storage) {
      case Storage::kF32:
        add(name + ".weight", DType::F32, {rows, cols});
        break;
      case Storage::kBF16:
        add(name + ".weight", DType::BF16, {rows, cols});
        break;
      case Storage::kFp8:
      case Storage::kFp8F32Scale:
        add(name + ".weight", DType::F8_E4M3, {rows, cols});
        add(name + ".scale", storage == Storage::kFp8 ? DType::F8_E8M0 : DType::F32,
            {ceil_div(rows, 128), ceil_div(cols, 128)});
        break;
      case Storage::kFp4:
        add(name + ".weight", DType::I8, {rows, cols / 2});
        add(name + ".scale", DType::F8_E8M0, {rows, cols / 32});
        break;
    }
  }
  void matrix(WeightMatrix&, const std::string& name, int64_t rows, int64_t cols,
              DType dtype) override {
    add(name, dtype, {rows, cols});
  }
  void vector(Vec&, const std::string& name, const std::vector<int64_t>& shape,
              DType dtype) override {
    add(name, dtype, shape);
  }
  void index_table(const int64_t*&, const std::string& name, int64_t rows, int64_t cols) override {
    add(name, DType::I64, {rows, cols});
  }

 private:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    ParamSpec spec;
    spec.name = name;
    spec.dtype = dtype;
    spec.shape = std::move(shape);
    spec.owner = shared_owner;
    registry_.add(std::move(spec));
  }
  ParamRegistry& registry_;
};

// ---- binding ----

class Binder final : public ParamVisitor {
 public:
  explicit Binder(const LoadedParams& params) : params_(params) {}

  void linear(Linear& out, const std::string& name, int64_t rows, int64_t cols, Storage storage,
              bool quantize_input) override {
    WeightMatrix& w = out.weight;
    w.rows = rows;
    w.cols = cols;
    w.data = params_.at(name + ".weight").bytes.data();
    switch (storage) {
      case Storage::kF32:
        w.format = WeightFormat::kF32;
        break;
      case Storage::kBF16:
        w.format = WeightFormat::kBF16;
        break;
      case Storage::kFp8:
      case Storage::kFp8F32Scale:
        w.format = WeightFormat::kFp8Block128;
        w.scale = params_.at(name + ".scale").bytes.data();
        w.scale_dtype = storage == Storage::kFp8 ? DType::F8_E8M0 : DType::F32;
        break;
      case Storage::kFp4:
        w.format = WeightFormat::kFp4Mx32;
        w.scale = params_.at(name + ".scale").bytes.data();
        w.scale_dtype = DType::F8_E8M0;
        break;
    }
    // What the loader's scale check found (unchecked, as on a tensor-parallel rank: false,
    // and the kernels check each row range).
    w.regular_scales = w.scale == nullptr || w.scale_dtype != DType::F8_E8M0 ||
                       params_.at(name + ".scale").regular_e8m0;
    out.quantize_input = quantize_input;
  }
  void matrix(WeightMatrix& out, const std::string& name, int64_t rows, int64_t cols,
              DType dtype) override {
    FLINT_CHECK(dtype == DType::F32 || dtype == DType::BF16);
    out.format = dtype == DType::F32 ? WeightFormat::kF32 : WeightFormat::kBF16;
    out.rows = rows;
    out.cols = cols;
    out.data = params_.at(name).bytes.data();
    out.scale = nullptr;
  }
  void vector(Vec& out, const std::string& name, const std::vector<int64_t>&,
              DType dtype) override {
    const LoadedParam& p = params_.at(name);
    if (dtype == DType::F32) {
      out.resize(p.bytes.size() / 4);
      std::memcpy(out.data(), p.bytes.data(), p.bytes.size());
    } else {
      FLINT_CHECK(dtype == DType::BF16);
      out.resize(p.bytes.size() / 2);
      const auto* src = reinterpret_cast<const uint16_t*>(p.bytes.data());
      for (size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(src[i]);
    }
  }
  void index_table(const int64_t*& out, const std::string& name, int64_t, int64_t) override {
    out = reinterpret_cast<const int64_t*>(params_.at(name).bytes.data());
  }

 private:
  const LoadedParams& params_;
};

}  // namespace

void visit_block(ParamVisitor& v, BlockWeights& w, const Config& c, const std::string& prefix,
                 int64_t layer_id) {
  w.layer_id = layer_id;
  v.vector(w.attn_norm, prefix + "attn_norm.weight", {c.hidden_size}, DType::BF16);
  v.vector(w.ffn_norm, prefix + "ffn_norm.weight", {c.hidden_size}, DType::BF16);
  visit_hc(v, w.hc_attn, c, prefix + "hc_attn");
  visit_hc(v, w.hc_ffn, c, prefix + "hc_ffn");
  visit_attention(v, w.attn, c, prefix + "attn.", c.compress_ratio(layer_id));
  visit_moe(v, w.ffn, c, prefix + "ffn.", layer_id);
}

void visit_target(ParamVisitor& v, TargetWeights& w, const Config& c) {
  v.matrix(w.embed, "embed.weight", c.vocab_size, c.hidden_size, DType::BF16);
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    visit_block(v, w.layers[static_cast<size_t>(i)], c, fmt::format("layers.{}.", i), i);
  }
  visit_hc_head(v, w.hc_head, c, "");
  v.vector(w.norm, "norm.weight", {c.hidden_size}, DType::BF16);
  v.matrix(w.head, "head.weight", c.vocab_size, c.hidden_size, DType::BF16);
}

void visit_mtp(ParamVisitor& v, MtpWeights& w, const Config& c, int64_t index) {
  std::string prefix = fmt::format("mtp.{}.", index);
  visit_block(v, w.block, c, prefix, c.num_hidden_layers + index);
  v.linear(w.e_proj, prefix + "e_proj", c.hidden_size, c.hidden_size, Storage::kFp8, true);
  v.linear(w.h_proj, prefix + "h_proj", c.hidden_size, c.hidden_size, Storage::kFp8, true);
  v.vector(w.enorm, prefix + "enorm.weight", {c.hidden_size}, DType::BF16);
  v.vector(w.hnorm, prefix + "hnorm.weight", {c.hidden_size}, DType::BF16);
  v.vector(w.norm, prefix + "norm.weight", {c.hidden_size}, DType::BF16);
  visit_hc_head(v, w.hc_head, c, prefix);
}

void visit_dspark(ParamVisitor& v, DSparkWeights& w, const Config& c) {
  FLINT_CHECK(c.dspark.has_value());
  const auto& d = *c.dspark;
  visit_shared_embed_head(v, w.embed, w.head, c);
  int64_t stages = c.num_nextn_predict_layers;
  w.stages.resize(static_cast<size_t>(stages));
  for (int64_t i = 0; i < stages; ++i) {
    visit_block(v, w.stages[static_cast<size_t>(i)], c, fmt::format("mtp.{}.", i),
                c.num_hidden_layers + i);
  }
  int64_t n_targets = static_cast<int64_t>(d.target_layer_ids.size());
  v.linear(w.main_proj, "mtp.0.main_proj", c.hidden_size, n_targets * c.hidden_size, Storage::kFp8,
           true);
  v.vector(w.main_norm, "mtp.0.main_norm.weight", {c.hidden_size}, DType::BF16);
  std::string last = fmt::format("mtp.{}.", stages - 1);
  v.vector(w.norm, last + "norm.weight", {c.hidden_size}, DType::BF16);
  visit_hc_head(v, w.hc_head, c, last);
  v.matrix(w.markov_w1, last + "markov_head.markov_w1.weight", c.vocab_size, d.markov_rank,
           DType::BF16);
  v.matrix(w.markov_w2, last + "markov_head.markov_w2.weight", c.vocab_size, d.markov_rank,
           DType::BF16);
  v.matrix(w.confidence, last + "confidence_head.proj.weight", 1, c.hidden_size + d.markov_rank,
           DType::BF16);
}

std::string component_name(Component component) {
  switch (component) {
    case Component::kTarget:
      return "target";
    case Component::kMtp:
      return "MTP draft";
    case Component::kDSpark:
      return "DSpark draft";
  }
  return "?";
}

ParamRegistry declare(Component component, const Config& c) {
  ComponentScope scope;
  scope.component = component_name(component);
  if (component == Component::kTarget) {
    scope.owned_prefixes = {""};
    scope.excluded_prefixes = {"mtp."};
    scope.unexpected_is_error = true;
    scope.foreign_note =
        c.dspark ? "the DSpark draft stages, loaded with --speculative-config method dspark"
                 : "the MTP layers, loaded with --speculative-config method mtp";
  } else {
    scope.owned_prefixes = {"mtp."};
    scope.unexpected_is_error = false;
    scope.foreign_note = "the target model's";
  }
  ParamRegistry registry(scope);
  Declarer declarer(registry);
  switch (component) {
    case Component::kTarget: {
      TargetWeights w;
      visit_target(declarer, w, c);
      break;
    }
    case Component::kMtp: {
      WeightMatrix embed, head;
      visit_shared_embed_head(declarer, embed, head, c);
      for (int64_t i = 0; i < c.num_nextn_predict_layers; ++i) {
        MtpWeights w;
        visit_mtp(declarer, w, c, i);
      }
      break;
    }
    case Component::kDSpark: {
      if (!c.dspark)
        throw Error("this checkpoint's config.json has no dspark_* keys: it holds no DSpark draft");
      DSparkWeights w;
      visit_dspark(declarer, w, c);
      break;
    }
  }
  return registry;
}

void bind(const LoadedParams& params, const Config& c, TargetWeights* out) {
  Binder binder(params);
  visit_target(binder, *out, c);
}

void bind(const LoadedParams& params, const Config& c, std::vector<MtpWeights>* out) {
  Binder binder(params);
  WeightMatrix embed, head;
  visit_shared_embed_head(binder, embed, head, c);
  out->resize(static_cast<size_t>(c.num_nextn_predict_layers));
  for (int64_t i = 0; i < c.num_nextn_predict_layers; ++i) {
    auto& layer = (*out)[static_cast<size_t>(i)];
    visit_mtp(binder, layer, c, i);
    layer.embed = embed;
    layer.head = head;
  }
}

void bind(const LoadedParams& params, const Config& c, DSparkWeights* out) {
  Binder binder(params);
  visit_dspark(binder, *out, c);
}

}  // namespace flint::dsv4
