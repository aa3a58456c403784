// The make-tiny presets. Dimensions are chosen to exercise every code path of the real
// models while staying small; docs/architecture.md (make-tiny) says why each value is what it is.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

namespace flint::dsv4 {

namespace {

// Shared by all presets: the values of the real V4-Flash config that do not set sizes.
Config base_config() {
  Config c;
  c.vocab_size = 129280;  // the real tokenizer's vocabulary
  c.max_position_embeddings = 1048576;
  c.rms_norm_eps = 1e-6;
  c.bos_token_id = 0;
  c.eos_token_ids = {1};
  c.num_key_value_heads = 1;
  c.qk_rope_head_dim = 64;
  c.sliding_window = 128;
  c.rope_theta = 10000.0;
  c.compress_rope_theta = 160000.0;
  c.rope_scaling = RopeScaling{16.0, 65536, 32.0, 1.0};
  c.n_shared_experts = 1;
  c.scoring_func = ScoringFunc::kSqrtSoftplus;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 1.5;
  c.swiglu_limit = 10.0;
  c.expert_dtype = ExpertDType::kFp4;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  return c;
}

Config tiny() {
  Config c = base_config();
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.num_nextn_predict_layers = 1;
  c.num_attention_heads = 4;
  c.head_dim = 256;  // differs from index_head_dim: llama.cpp rotates the main cache when equal
  c.q_lora_rank = 128;
  c.o_groups = 2;
  c.o_lora_rank = 128;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 256;
  c.num_hash_layers = 2;
  // Layer 0: window only + hash routing; 1: ratio 4 (indexer) + hash; 2: ratio 128 + bias;
  // 3: ratio 4 + bias; MTP: window only.
  c.compress_ratios = {0, 4, 128, 4, 0};
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_topk = 16;  // below the 75 ratio-4 entries of a 300-token sequence: selection matters
  return c;
}

Config tiny_dspark() {
  Config c = tiny();
  c.num_nextn_predict_layers = 3;
  c.compress_ratios = {0, 4, 128, 4, 0, 0, 0};
  c.dspark = DSparkConfig{5, 128799, {1, 2, 3}, 32};
  return c;
}

Config bench() {
  Config c = base_config();
  c.hidden_size = 1024;
  c.num_hidden_layers = 12;
  c.num_nextn_predict_layers = 1;
  c.num_attention_heads = 8;
  c.head_dim = 512;
  c.q_lora_rank = 512;
  c.o_groups = 4;
  c.o_lora_rank = 512;
  c.n_routed_experts = 64;
  c.num_experts_per_tok = 6;
  c.moe_intermediate_size = 512;
  c.num_hash_layers = 3;
  c.compress_ratios = {0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 0};
  c.index_n_heads = 16;
  c.index_head_dim = 128;
  c.index_topk = 128;
  return c;
}

// `bench` with Flash-0731's DSpark stages (three, as in the real model, reading the target's
// layers 3, 7 and 10): the speed of DSpark drafting against the bench target.
Config bench_dspark() {
  Config c = bench();
  c.num_nextn_predict_layers = 3;
  c.compress_ratios.insert(c.compress_ratios.end(), {0, 0});
  c.dspark = DSparkConfig{5, 128799, {3, 7, 10}, 256};
  return c;
}

}  // namespace

std::vector<std::string> tiny_preset_names() {
  return {"tiny", "tiny-dspark", "bench", "bench-dspark"};
}

Config tiny_preset(std::string_view name) {
  if (name == "tiny") return tiny();
  if (name == "tiny-dspark") return tiny_dspark();
  if (name == "bench") return bench();
  if (name == "bench-dspark") return bench_dspark();
  throw Error("unknown preset '{}': expected one of {}", name,
              fmt::join(tiny_preset_names(), ", "));
}

}  // namespace flint::dsv4
