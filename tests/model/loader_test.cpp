// The loader's regression tests (issue: a draft loader that crashed on a target-only
// tensor, or silently dropped tensors the draft needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "base/error.h"
#include "formats/checkpoint.h"
#include "model/deepseek_v4/model.h"
#include "tiny_fixture.h"

namespace flint::dsv4 {
namespace {

using flint::testing::EditableTensor;
using flint::testing::edited_copy;
using flint::testing::tiny_checkpoint;

LoadReport load(const std::filesystem::path& dir, Component component) {
  Config config = load_config(dir);
  auto checkpoint = std::make_shared<const Checkpoint>(Checkpoint::open(dir));
  LoadOptions options;
  options.log = false;
  return load_component(checkpoint, config, component, options).report;
}

std::string error_text(const LoadReport& report) {
  try {
    check_load_report(report);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool skipped(const LoadReport& r, const std::string& tensor, const std::string& reason_part) {
  return std::any_of(r.skipped.begin(), r.skipped.end(), [&](const LoadReport::Item& i) {
    return i.tensor == tensor && i.detail.find(reason_part) != std::string::npos;
  });
}

TEST(Loader, Flash0731CheckpointAsTargetOnly) {
  LoadReport r = load(tiny_checkpoint("tiny-dspark"), Component::kTarget);
  EXPECT_TRUE(r.ok()) << r.problems();
  size_t mtp = 0;
  Checkpoint checkpoint = Checkpoint::open(tiny_checkpoint("tiny-dspark"));
  for (const auto& [name, t] : checkpoint.tensors()) mtp += name.starts_with("mtp.");
  EXPECT_EQ(r.skipped.size(), mtp);  // every draft tensor, and nothing else
  EXPECT_TRUE(skipped(r, "mtp.0.main_proj.weight", "not owned by the target"));
  auto lines = r.summary_lines();
  ASSERT_EQ(lines.size(), 2u);  // loaded, and one line for all skipped tensors
  EXPECT_NE(lines[1].find(std::to_string(mtp) + " tensors"), std::string::npos) << lines[1];
}

TEST(Loader, TargetPlusDSparkDraftFromTheSameCheckpoint) {
  const auto& dir = tiny_checkpoint("tiny-dspark");
  LoadReport target = load(dir, Component::kTarget);
  LoadReport draft = load(dir, Component::kDSpark);
  EXPECT_TRUE(target.ok()) << target.problems();
  EXPECT_TRUE(draft.ok()) << draft.problems();
  // The draft reads the target's embed and head, and skips the target's own tensors.
  auto loaded = [&](const std::string& n) {
    return std::any_of(draft.loaded.begin(), draft.loaded.end(),
                       [&](const auto& i) { return i.tensor == n; });
  };
  EXPECT_TRUE(loaded("embed.weight"));
  EXPECT_TRUE(loaded("head.weight"));
  EXPECT_TRUE(loaded("mtp.2.markov_head.markov_w1.weight"));
  EXPECT_TRUE(skipped(draft, "layers.0.ffn.experts.0.w1.scale", "not owned by the DSpark draft"));
  EXPECT_EQ(target.loaded.size() + draft.loaded.size() - 2, Checkpoint::open(dir).tensors().size());
}

TEST(Loader, DraftSkipsTensorsItDoesNotRegisterAndSaysSo) {
  // Stage tensors the draft has no parameter for (like the routed-expert scale that crashed
  // vLLM's loader) are skipped with a reason, and loading succeeds.
  auto dir = edited_copy(
      tiny_checkpoint("tiny-dspark"), "extra-scales", [](std::vector<EditableTensor>& t) {
        t.push_back({"mtp.0.ffn.experts.routed_experts.w13_weight_scale",
                     DType::F32,
                     {4},
                     std::vector<std::byte>(16)});
        t.push_back(
            {"mtp.2.ffn.experts.7.w13_weight_scale", DType::F32, {2}, std::vector<std::byte>(8)});
      });
  LoadReport r = load(dir, Component::kDSpark);
  EXPECT_TRUE(r.ok()) << r.problems();
  EXPECT_TRUE(skipped(r, "mtp.0.ffn.experts.routed_experts.w13_weight_scale", "not used by it"));
  EXPECT_TRUE(skipped(r, "mtp.2.ffn.experts.7.w13_weight_scale", "not used by it"));
  bool summarised = false;
  for (const auto& line : r.summary_lines())
    summarised |= line.find("skipped 2 tensors") != std::string::npos;
  EXPECT_TRUE(summarised);
}

TEST(Loader, DraftMissingATensorItNeedsIsAnErrorNamingIt) {
  auto dir = edited_copy(
      tiny_checkpoint("tiny-dspark"), "draft-missing", [](std::vector<EditableTensor>& t) {
        std::erase_if(
            t, [](const EditableTensor& x) { return x.name == "mtp.1.ffn.experts.3.w2.scale"; });
      });
  LoadReport r = load(dir, Component::kDSpark);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(error_text(r).find("missing: mtp.1.ffn.experts.3.w2.scale"), std::string::npos)
      << error_text(r);
  EXPECT_TRUE(load(dir, Component::kTarget).ok());  // the target does not need it
}

TEST(Loader, DraftWithoutTheTargetsEmbedNamesTheOwner) {
  auto dir =
      edited_copy(tiny_checkpoint("tiny-dspark"), "no-embed", [](std::vector<EditableTensor>& t) {
        std::erase_if(t, [](const EditableTensor& x) { return x.name == "embed.weight"; });
      });
  std::string e = error_text(load(dir, Component::kDSpark));
  EXPECT_NE(e.find("missing: embed.weight (owned by the target, needed by the DSpark draft)"),
            std::string::npos)
      << e;
}

TEST(Loader, Fp4AndFp8Experts) {
  LoadReport fp4 = load(tiny_checkpoint("tiny", ExpertDType::kFp4), Component::kTarget);
  LoadReport fp8 = load(tiny_checkpoint("tiny", ExpertDType::kFp8), Component::kTarget);
  EXPECT_TRUE(fp4.ok()) << fp4.problems();
  EXPECT_TRUE(fp8.ok()) << fp8.problems();
  Checkpoint c8 = Checkpoint::open(tiny_checkpoint("tiny", ExpertDType::kFp8));
  EXPECT_EQ(c8.find("layers.0.ffn.experts.0.w1.weight")->info->dtype, DType::F8_E4M3);
  EXPECT_EQ(c8.find("layers.0.ffn.experts.0.w1.scale")->info->dtype, DType::F32);
  // FP8 experts under a config that says fp4: refused, naming the tensor and both dtypes.
  auto dir = edited_copy(tiny_checkpoint("tiny", ExpertDType::kFp8), "fp8-as-fp4",
                         [](std::vector<EditableTensor>&) {});
  Config config = load_config(dir);
  config.expert_dtype = ExpertDType::kFp4;
  std::ofstream(dir / "config.json") << config_to_json(config).dump();
  std::string e = error_text(load(dir, Component::kTarget));
  EXPECT_NE(e.find("layers.0.ffn.experts.0.w1.weight: dtype F8_E4M3 but expected I8"),
            std::string::npos)
      << e;
}

TEST(Loader, MissingTensorIsAnError) {
  auto dir = edited_copy(tiny_checkpoint(), "missing", [](std::vector<EditableTensor>& t) {
    std::erase_if(t, [](const EditableTensor& x) { return x.name == "layers.1.attn.wq_b.scale"; });
  });
  LoadReport r = load(dir, Component::kTarget);
  ASSERT_FALSE(r.ok());
  std::string e = error_text(r);
  EXPECT_NE(e.find("missing: layers.1.attn.wq_b.scale"), std::string::npos) << e;
  EXPECT_NE(e.find("1 problem"), std::string::npos) << e;
}

TEST(Loader, WrongShapeIsAnErrorWithBothShapes) {
  auto dir = edited_copy(tiny_checkpoint(), "shape", [](std::vector<EditableTensor>& t) {
    for (auto& x : t) {
      if (x.name == "layers.2.attn.wkv.weight") x.shape = {128, 512};  // same bytes, other shape
    }
  });
  std::string e = error_text(load(dir, Component::kTarget));
  EXPECT_NE(e.find("layers.2.attn.wkv.weight: shape [128, 512] but expected [256, 256]"),
            std::string::npos)
      << e;
}

TEST(Loader, EveryProblemIsReportedInOneError) {
  auto dir = edited_copy(tiny_checkpoint(), "many", [](std::vector<EditableTensor>& t) {
    std::erase_if(t, [](const EditableTensor& x) { return x.name == "norm.weight"; });
    for (auto& x : t) {
      if (x.name == "layers.0.attn.attn_sink") x.dtype = DType::I32;  // same size, other dtype
      if (x.name == "layers.3.ffn.gate.bias") x.bytes[3] = std::byte{0};
      if (x.name == "layers.0.attn.wq_a.scale") x.bytes[0] = std::byte{0xFF};  // NaN scale
    }
    t.push_back({"layers.0.attn.unknown_proj.weight", DType::BF16, {2}, std::vector<std::byte>(4)});
  });
  LoadReport r = load(dir, Component::kTarget);
  std::string e = error_text(r);
  EXPECT_NE(e.find("4 problems"), std::string::npos) << e;
  EXPECT_NE(e.find("missing: norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.attn.attn_sink: dtype I32 but expected F32"), std::string::npos) << e;
  EXPECT_NE(e.find("unexpected: layers.0.attn.unknown_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.attn.wq_a.scale: E8M0 scale 0 is 0xFF (NaN)"), std::string::npos) << e;
}

// The loader's scale check also tells the kernels which FP8 and FP4 weights have only
// regular E8M0 codes (not 0 or 255), so they need not scan them again per call. A code 0
// (2^-127, valid) keeps its weight on the checked path; unchecked scales mark nothing.
TEST(Loader, CheckedScalesMarkRegularWeights) {
  auto dir = edited_copy(tiny_checkpoint(), "subnormal-scale", [](std::vector<EditableTensor>& t) {
    for (auto& x : t) {
      if (x.name == "layers.0.attn.wq_a.scale") x.bytes[1] = std::byte{0};
    }
  });
  LoadOptions options;
  options.log = false;
  const std::unique_ptr<Model> model = load_model(dir, options);
  const TargetWeights& w = model->weights();
  EXPECT_FALSE(w.layers[0].attn.wq_a.weight.regular_scales);
  EXPECT_TRUE(w.layers[0].attn.wq_b.weight.regular_scales);
  EXPECT_TRUE(w.layers[1].attn.wq_a.weight.regular_scales);
  EXPECT_EQ(w.layers[0].ffn.experts[0].w1.weight.format, WeightFormat::kFp4Mx32);
  EXPECT_TRUE(w.layers[0].ffn.experts[0].w1.weight.regular_scales);

  options.check_scales = false;
  const std::unique_ptr<Model> unchecked = load_model(dir, options);
  EXPECT_FALSE(unchecked->weights().layers[1].attn.wq_a.weight.regular_scales);
  EXPECT_FALSE(unchecked->weights().layers[0].ffn.experts[0].w1.weight.regular_scales);
}

// What `flint inspect` does: headers only. The NaN check of the E8M0 scales would read every
// scale byte (8.6 GiB for DeepSeek-V4-Flash), so inspect turns it off and the report says so.
TEST(Loader, WithoutReadingPagesTheReportSaysWhatWasRead) {
  auto dir = edited_copy(tiny_checkpoint(), "nan-scale", [](std::vector<EditableTensor>& t) {
    for (auto& x : t) {
      if (x.name == "layers.0.attn.wq_a.scale") x.bytes[0] = std::byte{0xFF};  // NaN scale
    }
  });
  Config config = load_config(dir);
  auto checkpoint = std::make_shared<const Checkpoint>(Checkpoint::open(dir));
  size_t scales = 0;
  uint64_t scale_bytes = 0;
  for (const auto& [name, t] : checkpoint->tensors()) {
    if (t.info->dtype == DType::F8_E8M0 && !name.starts_with("mtp.")) {
      ++scales;
      scale_bytes += t.info->nbytes();
    }
  }
  ASSERT_GT(scales, 0u);
  LoadOptions inspect;
  inspect.read_pages = false;
  inspect.check_scales = false;
  inspect.log = false;
  LoadReport lazy = load_component(checkpoint, config, Component::kTarget, inspect).report;
  EXPECT_TRUE(lazy.ok()) << lazy.problems();  // the NaN is not looked for
  EXPECT_FALSE(lazy.scales_checked);
  EXPECT_EQ(lazy.scale_tensors, scales);
  EXPECT_EQ(lazy.scale_bytes, scale_bytes);
  std::string line = lazy.summary_lines()[0];
  EXPECT_NE(line.find(fmt::format("weights not read; the {} E8M0 scale tensors", scales)),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("not checked for NaN"), std::string::npos) << line;

  LoadOptions checked = inspect;
  checked.check_scales = true;
  LoadReport eager = load_component(checkpoint, config, Component::kTarget, checked).report;
  EXPECT_FALSE(eager.ok());
  ASSERT_EQ(eager.corrupt.size(), 1u);
  EXPECT_NE(eager.summary_lines()[0].find(fmt::format(
                "weights not read except the {} E8M0 scale tensors", scales)),
            std::string::npos)
      << eager.summary_lines()[0];
}

TEST(Loader, RequireCheckpointDirSaysWhatItExpected) {
  auto message = [](const std::filesystem::path& path) -> std::string {
    try {
      require_checkpoint_dir(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message(tiny_checkpoint()), "");
  const std::filesystem::path readme = std::filesystem::path(FLINT_SOURCE_DIR) / "README.md";
  std::string e = message(readme);
  EXPECT_NE(e.find("README.md is not a checkpoint directory (expected a folder with config.json "
                   "and *.safetensors"),
            std::string::npos)
      << e;
  auto empty = flint::testing::temp_dir("not-a-checkpoint");
  e = message(empty);
  EXPECT_NE(e.find("is not a checkpoint directory: it has no config.json"), std::string::npos)
      << e;
  std::filesystem::copy_file(tiny_checkpoint() / "config.json", empty / "config.json");
  e = message(empty);
  EXPECT_NE(e.find("is not a checkpoint directory: it has no *.safetensors files"),
            std::string::npos)
      << e;
  e = message(empty / "absent");
  EXPECT_NE(e.find("absent: no such file or directory"), std::string::npos) << e;
}

TEST(Loader, LoadedModelKeepsWeightsInTheMapping) {
  auto model = load_model(tiny_checkpoint());
  EXPECT_EQ(model->config().num_hidden_layers, 4);
}

}  // namespace
}  // namespace flint::dsv4
