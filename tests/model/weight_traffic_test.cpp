// decode_weight_bytes against the checkpoint's own tensor list: the bytes of every matrix
// the target reads per token (by name, from the safetensors headers), the embedding rows,
// and the expected distinct routed experts, E (1 - (1 - k/E)^t), per MoE layer.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "formats/checkpoint.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/weight_traffic.h"
#include "tiny_fixture.h"

namespace flint::dsv4 {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(WeightTraffic, DecodeBytesAreTheMatricesATokenReadsPlusItsExperts) {
  const auto& dir = flint::testing::tiny_checkpoint();
  const auto model = load_model(dir);
  const Config& c = model->config();
  const Checkpoint ckpt = Checkpoint::open(dir);
  double fixed = 0, embed = 0;
  std::map<std::string, double> experts;  // per layer, all routed experts' bytes
  for (const auto& [name, t] : ckpt.tensors()) {
    if (name.rfind("mtp.", 0) == 0) continue;  // the draft's
    if (t.info->shape.size() < 2) continue;    // vectors: norms, biases, sinks, hc scales
    if (ends_with(name, ".ape") || ends_with(name, "tid2eid")) continue;  // not matrices
    const auto bytes = static_cast<double>(t.bytes.size());
    if (name == "embed.weight") {
      embed = bytes;
    } else if (const auto at = name.find(".ffn.experts."); at != std::string::npos) {
      experts[name.substr(0, at)] += bytes;
    } else {
      fixed += bytes;
    }
  }
  ASSERT_EQ(experts.size(), static_cast<size_t>(c.num_hidden_layers));
  const double E = static_cast<double>(c.n_routed_experts);
  const double k = static_cast<double>(c.num_experts_per_tok);
  for (int64_t tokens : {1, 3, 64}) {
    const double t = static_cast<double>(tokens);
    double want = fixed + embed * t / static_cast<double>(c.vocab_size);
    for (const auto& [layer, bytes] : experts) want += (1 - std::pow(1 - k / E, t)) * bytes;
    EXPECT_NEAR(decode_weight_bytes(model->weights(), c, tokens), want, 1e-9 * want) << tokens;
  }
  // One token reads k of E experts; many tokens read nearly all of them.
  EXPECT_LT(decode_weight_bytes(model->weights(), c, 1),
            decode_weight_bytes(model->weights(), c, 64));
}

// Prefill FLOPs per token: 2 x the elements of every matrix a prompt token multiplies
// (from the tensors' shapes; packed FP4 bytes hold two elements), k/E of the routed experts,
// neither the embedding (a lookup) nor the head (only last tokens need logits).
TEST(WeightTraffic, PrefillFlopsAreTwiceTheElementsATokenMultiplies) {
  const auto& dir = flint::testing::tiny_checkpoint();
  const auto model = load_model(dir);
  const Config& c = model->config();
  const Checkpoint ckpt = Checkpoint::open(dir);
  double fixed = 0, experts = 0;
  for (const auto& [name, t] : ckpt.tensors()) {
    if (name.rfind("mtp.", 0) == 0 || name == "embed.weight" || name == "head.weight") continue;
    if (t.info->shape.size() < 2 || ends_with(name, ".scale")) continue;
    if (ends_with(name, ".ape") || ends_with(name, "tid2eid")) continue;
    double elements = t.info->dtype == DType::I8 ? 2 : 1;
    for (int64_t d : t.info->shape) elements *= static_cast<double>(d);
    (name.find(".ffn.experts.") != std::string::npos ? experts : fixed) += elements;
  }
  const double want = 2 * (fixed + experts * static_cast<double>(c.num_experts_per_tok) /
                                       static_cast<double>(c.n_routed_experts));
  EXPECT_NEAR(prefill_matmul_flops_per_token(model->weights(), c), want, 1e-9 * want);
}

}  // namespace
}  // namespace flint::dsv4
