// DeepSeek-V4 hyper-parameters, parsed once from the checkpoint's config.json.
//
// One struct covers the whole family: V4-Flash, V4-Flash-0731 (DSpark draft stages),
// V4-Pro and V4-Flash-Base (FP8 experts). Field names follow the HF config.json keys.
// parse_config validates every value the model relies on and throws flint::Error naming the
// key ("config.json: compress_ratios has 3 entries but num_hidden_layers is 43 ...").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flint::dsv4 {

enum class ScoringFunc { kSoftmax, kSigmoid, kSqrtSoftplus };
enum class ExpertDType { kFp4, kFp8 };

struct RopeScaling {  // YaRN, applied on compressed layers only
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

struct QuantizationConfig {  // how the checkpoint's FP8 linears are stored
  std::string quant_method = "fp8";
  std::string fmt = "e4m3";
  std::string scale_fmt = "ue8m0";
  std::string activation_scheme = "dynamic";
  int64_t block_rows = 128;
  int64_t block_cols = 128;
};

// Flash-0731's built-in DSpark draft: stages mtp.0..(n-1) read the target's hidden states
// at target_layer_ids and draft block_size tokens per step.
struct DSparkConfig {
  int64_t block_size = 0;
  int64_t noise_token_id = 0;
  std::vector<int64_t> target_layer_ids;
  int64_t markov_rank = 0;
};

struct Config {
  std::string model_type = "deepseek_v4";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_nextn_predict_layers = 0;  // MTP layers, or DSpark stages when dspark is set
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  int64_t bos_token_id = 0;
  std::vector<int64_t> eos_token_ids;
  bool tie_word_embeddings = false;

  // Attention: low-rank q, one shared K=V head, grouped low-rank output.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  int64_t sliding_window = 0;
  double rope_theta = 10000.0;            // ratio-0 layers, no YaRN
  double compress_rope_theta = 160000.0;  // compressed layers, with YaRN
  std::optional<RopeScaling> rope_scaling;
  std::vector<int64_t> compress_ratios;  // one per layer, then one per MTP/DSpark layer

  // Indexer (ratio-4 layers).
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  // MoE.
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 1;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_hash_layers = 0;
  ScoringFunc scoring_func = ScoringFunc::kSqrtSoftplus;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // 0 disables the clamps
  ExpertDType expert_dtype = ExpertDType::kFp8;

  // Hyper-connections.
  int64_t hc_mult = 1;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;

  QuantizationConfig quantization;
  std::optional<DSparkConfig> dspark;

  int64_t compress_ratio(int64_t layer) const {
    return compress_ratios.at(static_cast<size_t>(layer));
  }
  bool is_hash_layer(int64_t layer) const { return layer < num_hash_layers; }
  int64_t nope_head_dim() const { return head_dim - qk_rope_head_dim; }
  // A short human name: "DeepSeek-V4-Flash-0731-like (DSpark, 3 stages)" etc.
  std::string describe() const;
};

// Parses and validates; `label` (the file path) prefixes errors. Unknown keys are logged.
Config parse_config(const nlohmann::json& json, const std::string& label);
// Reads <dir>/config.json.
Config load_config(const std::filesystem::path& dir);
// The HF-style config.json for `config` (what make-tiny writes); parse_config inverts it.
nlohmann::ordered_json config_to_json(const Config& config);

std::string_view scoring_func_name(ScoringFunc f);

}  // namespace flint::dsv4
