#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/shard.h"
#include "model/deepseek_v4/tiny_checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"

namespace flint::dsv4 {
namespace {

nlohmann::json pro_config() {
  std::ifstream in(std::string(FLINT_SOURCE_DIR) + "/tests/model/data/deepseek_v4_pro_config.json");
  return nlohmann::json::parse(in);
}

// V4-Flash as published: 43 layers, compress ratios [0, 0] + [4, 128] x 20 + [4, 0].
nlohmann::json flash_config() {
  nlohmann::json j = pro_config();
  j["hidden_size"] = 4096;
  j["num_hidden_layers"] = 43;
  j["num_attention_heads"] = 64;
  j["q_lora_rank"] = 1024;
  j["o_groups"] = 8;
  j["n_routed_experts"] = 256;
  j["moe_intermediate_size"] = 2048;
  j["routed_scaling_factor"] = 1.5;
  j["index_topk"] = 512;
  std::vector<int> ratios = {0, 0};
  for (int i = 0; i < 20; ++i) ratios.insert(ratios.end(), {4, 128});
  ratios.insert(ratios.end(), {4, 0});
  j["compress_ratios"] = ratios;
  return j;
}

std::string error_of(const nlohmann::json& j) {
  try {
    parse_config(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ParsesPro) {
  Config c = parse_config(pro_config(), "config.json");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_hidden_layers, 61);
  EXPECT_EQ(c.compress_ratio(0), 128);
  EXPECT_EQ(c.compress_ratio(2), 4);
  EXPECT_EQ(c.compress_ratio(61), 0);  // the MTP layer
  EXPECT_EQ(c.index_topk, 1024);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSqrtSoftplus);
  EXPECT_EQ(c.expert_dtype, ExpertDType::kFp4);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 65536);
  EXPECT_DOUBLE_EQ(c.compress_rope_theta, 160000);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_FALSE(c.dspark.has_value());
}

TEST(Config, ParsesFlashFlash0731AndBase) {
  Config flash = parse_config(flash_config(), "config.json");
  EXPECT_EQ(flash.num_hidden_layers, 43);
  EXPECT_EQ(flash.compress_ratio(42), 4);

  nlohmann::json j = flash_config();
  j["num_nextn_predict_layers"] = 3;
  j["compress_ratios"].insert(j["compress_ratios"].end(), {0, 0});
  j["dspark_block_size"] = 5;
  j["dspark_noise_token_id"] = 128799;
  j["dspark_target_layer_ids"] = {40, 41, 42};
  j["dspark_markov_rank"] = 256;
  Config c0731 = parse_config(j, "config.json");
  ASSERT_TRUE(c0731.dspark.has_value());
  EXPECT_EQ(c0731.dspark->block_size, 5);
  EXPECT_EQ(c0731.dspark->target_layer_ids, (std::vector<int64_t>{40, 41, 42}));
  EXPECT_NE(c0731.describe().find("DSpark"), std::string::npos);

  nlohmann::json base = flash_config();
  base["expert_dtype"] = "fp8";
  EXPECT_EQ(parse_config(base, "config.json").expert_dtype, ExpertDType::kFp8);
}

TEST(Config, RoundTripsThroughJson) {
  Config c = parse_config(pro_config(), "config.json");
  nlohmann::json back = nlohmann::json::parse(config_to_json(c).dump());
  Config d = parse_config(back, "again");
  EXPECT_EQ(config_to_json(c).dump(), config_to_json(d).dump());
}

TEST(Config, RejectsInvalidValuesWithTheKey) {
  nlohmann::json j = flash_config();
  j["compress_ratios"] = {0, 4, 128};
  std::string e = error_of(j);
  EXPECT_NE(e.find("'compress_ratios': has 3 entries"), std::string::npos) << e;
  EXPECT_NE(e.find("num_hidden_layers (43)"), std::string::npos) << e;

  j = flash_config();
  j["hidden_size"] = "4096";
  EXPECT_NE(error_of(j).find("'hidden_size' must be an integer"), std::string::npos);

  j = flash_config();
  j.erase("head_dim");
  EXPECT_NE(error_of(j).find("missing required key 'head_dim'"), std::string::npos);

  j = flash_config();
  j["compress_ratios"][5] = 3;
  EXPECT_NE(error_of(j).find("entry 5 is 3"), std::string::npos);

  j = flash_config();
  j["num_experts_per_tok"] = 300;
  EXPECT_NE(error_of(j).find("num_experts_per_tok"), std::string::npos);

  j = flash_config();
  j["dspark_block_size"] = 5;
  j["dspark_noise_token_id"] = 999999;
  j["dspark_target_layer_ids"] = {40};
  j["dspark_markov_rank"] = 256;
  EXPECT_NE(error_of(j).find("dspark_noise_token_id"), std::string::npos);

  j = flash_config();
  j["model_type"] = "llama";
  EXPECT_NE(error_of(j).find("model_type is 'llama'"), std::string::npos);

  EXPECT_NE(error_of(nlohmann::json::array()).find("expected a JSON object"), std::string::npos);
}

TEST(Config, ImplausibleSizesAreRefusedBeforeAnythingIsAllocated) {
  nlohmann::json j = flash_config();
  j["n_routed_experts"] = 1000000000;
  EXPECT_NE(error_of(j).find("'n_routed_experts': 1000000000 is implausibly large"),
            std::string::npos)
      << error_of(j);
  j = flash_config();
  j["hc_sinkhorn_iters"] = int64_t{1} << 40;
  EXPECT_NE(error_of(j).find("hc_sinkhorn_iters"), std::string::npos);
  j = flash_config();
  j["compress_ratios"][3] = int64_t{1} << 40;
  EXPECT_NE(error_of(j).find("compress_ratios"), std::string::npos);
}

TEST(Config, MissingFileIsAnError) {
  EXPECT_THROW(load_config("/nonexistent/flint/checkpoint"), Error);
}

}  // namespace
}  // namespace flint::dsv4

namespace flint::dsv4 {
namespace {

// Tensor parallelism refuses, naming the field, a split the checkpoint's shapes do not allow.
TEST(Shard, RefusesSplitsTheShapesDoNotAllow) {
  const Config tiny = tiny_preset("tiny");
  auto message = [](const Config& c, ShardPlan p) {
    try {
      check_shardable(c, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(tiny, {0, 2, false}), "");
  EXPECT_EQ(message(tiny, {1, 2, true}), "");
  EXPECT_NE(message(tiny, {0, 3, false}).find("does not divide num_attention_heads = 4"),
            std::string::npos);
  EXPECT_NE(message(tiny, {0, 4, true}).find("o_groups"), std::string::npos);  // 2 groups
  Config c = tiny;
  c.moe_intermediate_size = 192;  // 96 rows per rank: inside an FP8 block of 128
  EXPECT_NE(message(c, {0, 2, false}).find("moe_intermediate_size"), std::string::npos);
  c = tiny;
  c.n_routed_experts = 5;  // with expert parallelism, whole experts
  EXPECT_NE(message(c, {0, 2, true}).find("n_routed_experts"), std::string::npos);
}

}  // namespace
}  // namespace flint::dsv4
