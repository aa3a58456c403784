#include "model/deepseek_v4/config.h"

#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/log.h"

namespace flint::dsv4 {

namespace {

using json = nlohmann::json;

// Typed access to one JSON object that remembers which keys were read, so that unknown
// keys can be reported and every error names the file and key.
class Reader {
 public:
  Reader(const json& object, std::string label) : object_(object), label_(std::move(label)) {}

  bool has(const std::string& key) const {
    return object_.contains(key) && !object_[key].is_null();
  }

  int64_t integer(const std::string& key) {
    const json& v = get(key);
    if (!v.is_number_integer()) fail(key, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t integer(const std::string& key, int64_t fallback) {
    return has(key) ? integer(key) : mark(key, fallback);
  }

  double number(const std::string& key) {
    const json& v = get(key);
    if (!v.is_number()) fail(key, "a number", v);
    return v.get<double>();
  }
  double number(const std::string& key, double fallback) {
    return has(key) ? number(key) : mark(key, fallback);
  }

  bool boolean(const std::string& key, bool fallback) {
    if (!has(key)) return mark(key, fallback);
    const json& v = get(key);
    if (!v.is_boolean()) fail(key, "true or false", v);
    return v.get<bool>();
  }

  std::string string(const std::string& key, const std::string& fallback) {
    if (!has(key)) return mark(key, fallback);
    const json& v = get(key);
    if (!v.is_string()) fail(key, "a string", v);
    return v.get<std::string>();
  }

  std::vector<int64_t> integers(const std::string& key) {
    const json& v = get(key);
    if (!v.is_array()) fail(key, "a list of integers", v);
    std::vector<int64_t> out;
    for (const auto& item : v) {
      if (!item.is_number_integer()) fail(key, "a list of integers", v);
      out.push_back(item.get<int64_t>());
    }
    return out;
  }

  Reader object(const std::string& key) {
    const json& v = get(key);
    if (!v.is_object()) fail(key, "an object", v);
    return Reader(v, label_ + ": " + key);
  }

  const json& get(const std::string& key) {
    seen_.insert(key);
    if (!object_.contains(key)) throw Error("{}: missing required key '{}'", label_, key);
    return object_[key];
  }

  [[noreturn]] void fail(const std::string& key, const char* expected, const json& got) const {
    throw Error("{}: '{}' must be {}, got {}", label_, key, expected, got.dump());
  }
  [[noreturn]] void invalid(const std::string& key, const std::string& why) const {
    throw Error("{}: invalid '{}': {}", label_, key, why);
  }

  std::vector<std::string> unknown_keys() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : object_.items()) {
      if (!seen_.count(key)) out.push_back(key);
    }
    return out;
  }
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* k : keys) seen_.insert(k);
  }

 private:
  template <typename T>
  T mark(const std::string& key, T value) {
    seen_.insert(key);
    return value;
  }

  const json& object_;
  std::string label_;
  std::set<std::string> seen_;
};

void require_positive(Reader& r, const char* key, int64_t value) {
  if (value <= 0) r.invalid(key, fmt::format("must be positive, got {}", value));
}

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Upper bounds far above every published model (V4-Pro: hidden 7168, 61 layers, 384 experts)
// that keep a malformed config.json from making flint declare billions of tensors, allocate
// absurd state or loop for hours before it reads a single weight.
void check_bounds(const Config& c, Reader& r) {
  struct Bound {
    const char* key;
    int64_t value;
    int64_t max;
  };
  const Bound bounds[] = {
      {"vocab_size", c.vocab_size, 1 << 22},
      {"hidden_size", c.hidden_size, 1 << 16},
      {"num_hidden_layers", c.num_hidden_layers, 1 << 10},
      {"num_nextn_predict_layers", c.num_nextn_predict_layers, 64},
      {"num_attention_heads", c.num_attention_heads, 1 << 12},
      {"head_dim", c.head_dim, 1 << 13},
      {"q_lora_rank", c.q_lora_rank, 1 << 16},
      {"o_groups", c.o_groups, 1 << 12},
      {"o_lora_rank", c.o_lora_rank, 1 << 16},
      {"sliding_window", c.sliding_window, 1 << 20},
      {"index_n_heads", c.index_n_heads, 1 << 12},
      {"index_head_dim", c.index_head_dim, 1 << 13},
      {"index_topk", c.index_topk, 1 << 20},
      {"n_routed_experts", c.n_routed_experts, 1 << 14},
      {"num_experts_per_tok", c.num_experts_per_tok, 1 << 10},
      {"moe_intermediate_size", c.moe_intermediate_size, 1 << 18},
      {"hc_mult", c.hc_mult, 64},
      {"hc_sinkhorn_iters", c.hc_sinkhorn_iters, 10000},
  };
  for (const auto& b : bounds) {
    if (b.value > b.max)
      r.invalid(b.key,
                fmt::format("{} is implausibly large (flint accepts at most {})", b.value, b.max));
  }
  for (int64_t ratio : c.compress_ratios) {
    if (ratio > (1 << 16))
      r.invalid("compress_ratios", fmt::format("{} is implausibly large", ratio));
  }
  if (c.dspark && (c.dspark->block_size > 1024 || c.dspark->markov_rank > (1 << 16) ||
                   c.dspark->target_layer_ids.size() > 1024)) {
    r.invalid("dspark_block_size", "DSpark sizes are implausibly large");
  }
}

void validate(const Config& c, Reader& r) {
  check_bounds(c, r);
  require_positive(r, "vocab_size", c.vocab_size);
  require_positive(r, "hidden_size", c.hidden_size);
  require_positive(r, "num_hidden_layers", c.num_hidden_layers);
  require_positive(r, "num_attention_heads", c.num_attention_heads);
  require_positive(r, "head_dim", c.head_dim);
  require_positive(r, "q_lora_rank", c.q_lora_rank);
  require_positive(r, "o_groups", c.o_groups);
  require_positive(r, "o_lora_rank", c.o_lora_rank);
  require_positive(r, "sliding_window", c.sliding_window);
  require_positive(r, "n_routed_experts", c.n_routed_experts);
  require_positive(r, "num_experts_per_tok", c.num_experts_per_tok);
  require_positive(r, "moe_intermediate_size", c.moe_intermediate_size);
  require_positive(r, "hc_mult", c.hc_mult);
  if (c.num_nextn_predict_layers < 0) r.invalid("num_nextn_predict_layers", "must not be negative");
  if (c.num_key_value_heads != 1) {
    r.invalid("num_key_value_heads",
              fmt::format("DeepSeek-V4 shares one K=V head, got {}", c.num_key_value_heads));
  }
  if (c.qk_rope_head_dim <= 0 || c.qk_rope_head_dim % 2 != 0 || c.qk_rope_head_dim >= c.head_dim) {
    r.invalid("qk_rope_head_dim",
              fmt::format("must be even, positive and below head_dim ({}), got {}", c.head_dim,
                          c.qk_rope_head_dim));
  }
  // The KV's non-rope dims are rounded through FP8 in blocks of 64 (official quantisation).
  if (c.nope_head_dim() % 64 != 0) {
    r.invalid("head_dim", fmt::format("head_dim - qk_rope_head_dim = {} must be a multiple of 64",
                                      c.nope_head_dim()));
  }
  // Linear-layer inputs are rounded through FP8 in blocks of 128 columns.
  if (c.hidden_size % 128 != 0) r.invalid("hidden_size", "must be a multiple of 128");
  if (c.q_lora_rank % 128 != 0) r.invalid("q_lora_rank", "must be a multiple of 128");
  if (c.moe_intermediate_size % 128 != 0)
    r.invalid("moe_intermediate_size", "must be a multiple of 128");
  if ((c.num_attention_heads * c.head_dim) % c.o_groups != 0 ||
      c.num_attention_heads % c.o_groups != 0) {
    r.invalid("o_groups",
              fmt::format("must divide num_attention_heads ({})", c.num_attention_heads));
  }
  if ((c.o_groups * c.o_lora_rank) % 128 != 0)
    r.invalid("o_lora_rank", "o_groups * o_lora_rank must be a multiple of 128");
  if (c.num_experts_per_tok > c.n_routed_experts) {
    r.invalid("num_experts_per_tok", fmt::format("{} exceeds n_routed_experts ({})",
                                                 c.num_experts_per_tok, c.n_routed_experts));
  }
  if (c.n_shared_experts != 1)
    r.invalid("n_shared_experts", "DeepSeek-V4 has exactly one shared expert");
  if (c.num_hash_layers < 0 || c.num_hash_layers > c.num_hidden_layers) {
    r.invalid("num_hash_layers",
              fmt::format("must be between 0 and num_hidden_layers ({})", c.num_hidden_layers));
  }
  int64_t want = c.num_hidden_layers + c.num_nextn_predict_layers;
  if (static_cast<int64_t>(c.compress_ratios.size()) < want) {
    r.invalid("compress_ratios",
              fmt::format(
                  "has {} entries but num_hidden_layers ({}) + num_nextn_predict_layers ({}) = {} "
                  "need one each",
                  c.compress_ratios.size(), c.num_hidden_layers, c.num_nextn_predict_layers, want));
  }
  bool any_indexer = false;
  for (size_t i = 0; i < c.compress_ratios.size(); ++i) {
    int64_t ratio = c.compress_ratios[i];
    if (ratio != 0 && (ratio < 2 || !is_power_of_two(ratio))) {
      r.invalid("compress_ratios",
                fmt::format("entry {} is {}; expected 0 (sliding window only) or a power "
                            "of two >= 2",
                            i, ratio));
    }
    any_indexer |= ratio == 4;
  }
  if (any_indexer) {
    require_positive(r, "index_n_heads", c.index_n_heads);
    require_positive(r, "index_topk", c.index_topk);
    if (!is_power_of_two(c.index_head_dim) || c.index_head_dim <= c.qk_rope_head_dim ||
        c.index_head_dim % 32 != 0) {
      r.invalid("index_head_dim",
                fmt::format("must be a power of two, a multiple of 32 and above "
                            "qk_rope_head_dim (Hadamard transform, FP4 blocks), got {}",
                            c.index_head_dim));
    }
  }
  if (c.hc_mult > 1 && c.hc_sinkhorn_iters <= 0) r.invalid("hc_sinkhorn_iters", "must be positive");
  if (c.rope_scaling && c.rope_scaling->factor < 1.0)
    r.invalid("rope_scaling", "factor must be >= 1");
  if (c.quantization.block_rows != 128 || c.quantization.block_cols != 128) {
    r.invalid("quantization_config", "weight_block_size must be [128, 128]");
  }
  if (c.dspark) {
    const auto& d = *c.dspark;
    require_positive(r, "dspark_block_size", d.block_size);
    require_positive(r, "dspark_markov_rank", d.markov_rank);
    if (d.noise_token_id < 0 || d.noise_token_id >= c.vocab_size) {
      r.invalid("dspark_noise_token_id",
                fmt::format("{} is outside the vocabulary", d.noise_token_id));
    }
    if (d.target_layer_ids.empty()) r.invalid("dspark_target_layer_ids", "must not be empty");
    for (int64_t id : d.target_layer_ids) {
      if (id < 0 || id >= c.num_hidden_layers) {
        r.invalid("dspark_target_layer_ids", fmt::format("layer {} does not exist", id));
      }
    }
    if (c.num_nextn_predict_layers <= 0) {
      r.invalid("num_nextn_predict_layers", "a DSpark checkpoint needs at least one draft stage");
    }
  }
}

}  // namespace

std::string_view scoring_func_name(ScoringFunc f) {
  switch (f) {
    case ScoringFunc::kSoftmax:
      return "softmax";
    case ScoringFunc::kSigmoid:
      return "sigmoid";
    case ScoringFunc::kSqrtSoftplus:
      return "sqrtsoftplus";
  }
  return "?";
}

Config parse_config(const json& root, const std::string& label) {
  if (!root.is_object()) throw Error("{}: expected a JSON object", label);
  Reader r(root, label);
  Config c;
  c.model_type = r.string("model_type", "deepseek_v4");
  if (c.model_type != "deepseek_v4") {
    throw Error(
        "{}: model_type is '{}'; flint serves DeepSeek-V4 checkpoints (model_type deepseek_v4)",
        label, c.model_type);
  }
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_nextn_predict_layers = r.integer("num_nextn_predict_layers", 0);
  c.max_position_embeddings = r.integer("max_position_embeddings", 1 << 20);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.bos_token_id = r.integer("bos_token_id", 0);
  if (r.has("eos_token_id") && root["eos_token_id"].is_array()) {
    c.eos_token_ids = r.integers("eos_token_id");
  } else {
    c.eos_token_ids = {r.integer("eos_token_id", 1)};
  }
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  if (c.tie_word_embeddings) r.invalid("tie_word_embeddings", "DeepSeek-V4 has a separate head");

  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads", 1);
  c.head_dim = r.integer("head_dim");
  c.qk_rope_head_dim = r.integer("qk_rope_head_dim");
  c.q_lora_rank = r.integer("q_lora_rank");
  c.o_groups = r.integer("o_groups");
  c.o_lora_rank = r.integer("o_lora_rank");
  c.sliding_window = r.integer("sliding_window");
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.compress_rope_theta = r.number("compress_rope_theta", 160000.0);
  if (r.has("rope_scaling")) {
    Reader s = r.object("rope_scaling");
    std::string type = s.has("type") ? s.string("type", "") : s.string("rope_type", "");
    if (type != "yarn") s.invalid("type", fmt::format("only yarn is supported, got '{}'", type));
    RopeScaling y;
    y.factor = s.number("factor");
    y.original_max_position_embeddings = s.integer("original_max_position_embeddings");
    y.beta_fast = s.number("beta_fast", 32.0);
    y.beta_slow = s.number("beta_slow", 1.0);
    s.ignore({"mscale", "mscale_all_dim"});
    c.rope_scaling = y;
  }
  c.compress_ratios =
      r.has("compress_ratios") ? r.integers("compress_ratios") : std::vector<int64_t>{};
  if (!r.has("compress_ratios")) {
    c.compress_ratios.assign(static_cast<size_t>(c.num_hidden_layers + c.num_nextn_predict_layers),
                             0);
  }
  c.index_n_heads = r.integer("index_n_heads", 0);
  c.index_head_dim = r.integer("index_head_dim", 0);
  c.index_topk = r.integer("index_topk", 0);

  c.n_routed_experts = r.integer("n_routed_experts");
  c.n_shared_experts = r.integer("n_shared_experts", 1);
  c.num_experts_per_tok = r.integer("num_experts_per_tok");
  c.moe_intermediate_size = r.integer("moe_intermediate_size");
  c.num_hash_layers = r.integer("num_hash_layers", 0);
  std::string scoring = r.string("scoring_func", "sqrtsoftplus");
  if (scoring == "sqrtsoftplus")
    c.scoring_func = ScoringFunc::kSqrtSoftplus;
  else if (scoring == "sigmoid")
    c.scoring_func = ScoringFunc::kSigmoid;
  else if (scoring == "softmax")
    c.scoring_func = ScoringFunc::kSoftmax;
  else
    r.invalid("scoring_func", fmt::format("'{}' is not sqrtsoftplus, sigmoid or softmax", scoring));
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = r.number("routed_scaling_factor", 1.0);
  c.swiglu_limit = r.number("swiglu_limit", 0.0);
  std::string expert_dtype = r.string("expert_dtype", "fp8");
  if (expert_dtype == "fp4")
    c.expert_dtype = ExpertDType::kFp4;
  else if (expert_dtype == "fp8")
    c.expert_dtype = ExpertDType::kFp8;
  else
    r.invalid("expert_dtype", fmt::format("'{}' is not fp4 or fp8", expert_dtype));
  std::string topk_method = r.string("topk_method", "noaux_tc");
  if (topk_method != "noaux_tc")
    r.invalid("topk_method", fmt::format("'{}' is not noaux_tc", topk_method));
  std::string act = r.string("hidden_act", "silu");
  if (act != "silu") r.invalid("hidden_act", fmt::format("'{}' is not silu", act));

  c.hc_mult = r.integer("hc_mult", 1);
  c.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters", 0);
  c.hc_eps = r.number("hc_eps", 1e-6);

  if (r.has("quantization_config")) {
    Reader q = r.object("quantization_config");
    c.quantization.quant_method = q.string("quant_method", "fp8");
    c.quantization.fmt = q.string("fmt", "e4m3");
    c.quantization.scale_fmt = q.string("scale_fmt", "ue8m0");
    c.quantization.activation_scheme = q.string("activation_scheme", "dynamic");
    if (q.has("weight_block_size")) {
      auto block = q.integers("weight_block_size");
      if (block.size() != 2) q.invalid("weight_block_size", "must have two entries");
      c.quantization.block_rows = block[0];
      c.quantization.block_cols = block[1];
    }
    if (c.quantization.quant_method != "fp8" || c.quantization.fmt != "e4m3") {
      q.invalid("quant_method", fmt::format("flint reads fp8 e4m3 checkpoints, got {} {}",
                                            c.quantization.quant_method, c.quantization.fmt));
    }
    if (c.quantization.scale_fmt != "ue8m0") {
      q.invalid("scale_fmt",
                fmt::format("flint reads ue8m0 block scales, got '{}'", c.quantization.scale_fmt));
    }
  }

  if (r.has("dspark_block_size") || r.has("dspark_target_layer_ids")) {
    DSparkConfig d;
    d.block_size = r.integer("dspark_block_size");
    d.noise_token_id = r.integer("dspark_noise_token_id");
    d.target_layer_ids = r.integers("dspark_target_layer_ids");
    d.markov_rank = r.integer("dspark_markov_rank");
    c.dspark = d;
  }

  // Keys that describe training or the HF runtime and change nothing here.
  r.ignore({"architectures", "attention_bias", "attention_dropout", "initializer_range",
            "torch_dtype", "transformers_version", "use_cache", "auto_map", "pad_token_id",
            "first_k_dense_replace", "n_group", "topk_group", "moe_layer_freq", "ep_size",
            "kv_lora_rank", "dtype"});
  validate(c, r);
  auto unknown = r.unknown_keys();
  if (!unknown.empty())
    spdlog::info("{}: ignoring keys flint does not use: {}", label, fmt::join(unknown, ", "));
  return c;
}

Config load_config(const std::filesystem::path& dir) {
  std::filesystem::path path = std::filesystem::is_directory(dir) ? dir / "config.json" : dir;
  std::ifstream in(path);
  if (!in)
    throw Error(
        "cannot read {}: no such file (a DeepSeek-V4 checkpoint directory holds config.json)",
        path.string());
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& e) {
    throw Error("{}: not valid JSON: {}", path.string(), e.what());
  }
  return parse_config(root, path.string());
}

nlohmann::ordered_json config_to_json(const Config& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"DeepseekV4ForCausalLM"};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_nextn_predict_layers"] = c.num_nextn_predict_layers;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else
    j["eos_token_id"] = c.eos_token_ids;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["hidden_act"] = "silu";
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["qk_rope_head_dim"] = c.qk_rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["sliding_window"] = c.sliding_window;
  j["rope_theta"] = c.rope_theta;
  j["compress_rope_theta"] = c.compress_rope_theta;
  if (c.rope_scaling) {
    j["rope_scaling"] = {
        {"type", "yarn"},
        {"factor", c.rope_scaling->factor},
        {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings},
        {"beta_fast", c.rope_scaling->beta_fast},
        {"beta_slow", c.rope_scaling->beta_slow}};
  }
  j["compress_ratios"] = c.compress_ratios;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["num_hash_layers"] = c.num_hash_layers;
  j["scoring_func"] = scoring_func_name(c.scoring_func);
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["swiglu_limit"] = c.swiglu_limit;
  j["topk_method"] = "noaux_tc";
  j["expert_dtype"] = c.expert_dtype == ExpertDType::kFp4 ? "fp4" : "fp8";
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["quantization_config"] = {
      {"activation_scheme", c.quantization.activation_scheme},
      {"fmt", c.quantization.fmt},
      {"quant_method", c.quantization.quant_method},
      {"scale_fmt", c.quantization.scale_fmt},
      {"weight_block_size", {c.quantization.block_rows, c.quantization.block_cols}}};
  if (c.dspark) {
    j["dspark_block_size"] = c.dspark->block_size;
    j["dspark_noise_token_id"] = c.dspark->noise_token_id;
    j["dspark_target_layer_ids"] = c.dspark->target_layer_ids;
    j["dspark_markov_rank"] = c.dspark->markov_rank;
  }
  j["torch_dtype"] = "bfloat16";
  return j;
}

std::string Config::describe() const {
  std::string family = hidden_size >= 7168   ? "DeepSeek-V4-Pro"
                       : hidden_size == 4096 ? "DeepSeek-V4-Flash"
                                             : "DeepSeek-V4";
  std::string extra;
  if (dspark)
    extra = fmt::format(", DSpark draft with {} stages", num_nextn_predict_layers);
  else if (num_nextn_predict_layers > 0)
    extra = fmt::format(", {} MTP layer(s)", num_nextn_predict_layers);
  if (expert_dtype == ExpertDType::kFp8) extra += ", FP8 experts";
  return fmt::format("{}-like: {} layers, hidden {}, {} heads x {}, {} experts (top {}){}", family,
                     num_hidden_layers, hidden_size, num_attention_heads, head_dim,
                     n_routed_experts, num_experts_per_tok, extra);
}

}  // namespace flint::dsv4
