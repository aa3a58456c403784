// `flint inspect MODEL [serve flags]`: what flint sees in a checkpoint, without running it:
// the configuration, tensor counts and bytes per dtype, and the load report of the target
// and (with --speculative-config) of the draft. Accepts the whole `flint serve` command
// line, so a deployment can be checked by replacing `serve` with `inspect`.
// Exit code 1 if any component cannot be loaded. Reads the safetensors headers only (not the
// weights, nor the E8M0 scales for their NaN check: that is for loading).
#include <map>

#include <fmt/format.h>

#include "base/error.h"
#include "base/log.h"
#include "base/strings.h"
#include "cli/command.h"
#include "cli/serve_args.h"
#include "formats/loader.h"
#include "model/deepseek_v4/model.h"

namespace flint::cli {
namespace {

void print_tensor_table(const Checkpoint& checkpoint) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_dtype;  // count, bytes
  for (const auto& [name, t] : checkpoint.tensors()) {
    auto& [count, bytes] = by_dtype[std::string(dtype_name(t.info->dtype))];
    ++count;
    bytes += t.info->nbytes();
  }
  fmt::print("tensors: {} in {} file(s), {}\n", checkpoint.tensors().size(),
             checkpoint.files().size(),
             format_bytes(static_cast<double>(checkpoint.total_bytes())));
  for (const auto& [dtype, stats] : by_dtype) {
    fmt::print("  {:<8} {:>8} tensors {:>12}\n", dtype, stats.first,
               format_bytes(static_cast<double>(stats.second)));
  }
}

void print_config(const dsv4::Config& c) {
  fmt::print("model: {}\n", c.describe());
  fmt::print(
      "  vocab {}, hidden {}, layers {} (+{} {}), heads {} x {} (rope {}), q_lora {}, o {} x {}\n",
      c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_nextn_predict_layers,
      c.dspark ? "DSpark stages" : "MTP", c.num_attention_heads, c.head_dim, c.qk_rope_head_dim,
      c.q_lora_rank, c.o_groups, c.o_lora_rank);
  fmt::print("  experts {} (top {}, inter {}, {} hash layers, {}, scale {}), expert dtype {}\n",
             c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.num_hash_layers,
             dsv4::scoring_func_name(c.scoring_func), c.routed_scaling_factor,
             c.expert_dtype == dsv4::ExpertDType::kFp4 ? "fp4" : "fp8");
  std::map<int64_t, int64_t> ratios;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) ratios[c.compress_ratio(i)]++;
  std::string ratio_text;
  for (const auto& [r, n] : ratios)
    ratio_text += fmt::format("{}{} x ratio {}", ratio_text.empty() ? "" : ", ", n, r);
  fmt::print("  attention: window {}, {}; indexer {} heads x {}, top {}\n", c.sliding_window,
             ratio_text, c.index_n_heads, c.index_head_dim, c.index_topk);
  fmt::print("  hyper-connections {} streams, {} Sinkhorn rounds\n", c.hc_mult,
             c.hc_sinkhorn_iters);
  if (c.dspark) {
    fmt::print("  DSpark: block {}, noise token {}, target layers {}, Markov rank {}\n",
               c.dspark->block_size, c.dspark->noise_token_id,
               fmt::join(c.dspark->target_layer_ids, ","), c.dspark->markov_rank);
  }
}

bool print_report(const LoadReport& report) {
  for (const auto& line : report.summary_lines()) fmt::print("{}\n", line);
  if (!report.ok()) fmt::print("{}", report.problems());
  return report.ok();
}

int run_inspect(std::span<const std::string> args) {
  ServeArgs serve = parse_serve_args(args, "inspect",
                                     "Shows what flint sees in a DeepSeek-V4 checkpoint without "
                                     "running the model: the configuration, "
                                     "tensor counts and bytes per dtype, and the load report of "
                                     "the target and, with --speculative-config, "
                                     "of the draft. Accepts the whole `flint serve` command line "
                                     "(its flags are listed below), so a "
                                     "deployment can be checked by replacing `serve` with "
                                     "`inspect`. Exits with 1 if a component cannot be "
                                     "loaded.");
  if (serve.help) return kExitOk;
  init_logging(serve.flint.log_level);
  const std::string& dir = serve.model.path;

  require_checkpoint_dir(dir);  // "README.md is not a checkpoint directory", not a JSON error
  dsv4::Config config = dsv4::load_config(dir);
  auto checkpoint = std::make_shared<const Checkpoint>(Checkpoint::open(dir));
  print_config(config);
  print_tensor_table(*checkpoint);

  LoadOptions options;
  // inspect reads the safetensors headers only. The NaN check of the E8M0 scales would read
  // every scale byte (8.6 GiB for DeepSeek-V4-Flash); loading for a run checks them, and the
  // report says they were not checked here.
  options.read_pages = false;
  options.check_scales = false;
  options.log = false;
  bool ok = print_report(
      dsv4::load_component(checkpoint, config, dsv4::Component::kTarget, options).report);

  const SpeculativeArgs& spec = serve.speculative;
  if (spec.enabled() && spec.method != SpecMethod::kNgram) {
    std::shared_ptr<const Checkpoint> draft_checkpoint = checkpoint;
    dsv4::Config draft_config = config;
    if (!spec.draft_in_target_checkpoint && spec.model) {
      require_checkpoint_dir(*spec.model);
      draft_config = dsv4::load_config(*spec.model);
      draft_checkpoint = std::make_shared<const Checkpoint>(Checkpoint::open(*spec.model));
    }
    dsv4::Component component = dsv4::Component::kMtp;
    if (spec.method == SpecMethod::kDSpark ||
        (spec.method == SpecMethod::kAuto && draft_config.dspark)) {
      component = dsv4::Component::kDSpark;
    }
    if (component == dsv4::Component::kDSpark && !draft_config.dspark) {
      throw Error(
          "{}: --speculative-config method dspark needs a checkpoint with DSpark stages "
          "(config.json dspark_* keys, as DeepSeek-V4-Flash-0731)",
          draft_checkpoint->dir().string());
    }
    if (component == dsv4::Component::kMtp && draft_config.num_nextn_predict_layers == 0) {
      throw Error("{}: the checkpoint has no MTP layer (num_nextn_predict_layers is 0)",
                  draft_checkpoint->dir().string());
    }
    ok &= print_report(
        dsv4::load_component(draft_checkpoint, draft_config, component, options).report);
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace

FLINT_COMMAND("inspect",
              "show a checkpoint's configuration, tensors and load report (no model run)",
              run_inspect);

}  // namespace flint::cli
