// `flint serve MODEL [flags]`: the vLLM-compatible server command.
//
// Parses the command line (serve_args.h), logs one line per flag given, checks that MODEL
// is a checkpoint directory whose config.json agrees with the flags, then calls run_serve
// (serve_run.cpp), which loads the model and serves the API.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "cli/serve_args.h"

namespace flint::cli {

// serve_run.cpp: load, serve, shut down.
int run_serve(const ServeArgs& args);

namespace {

using Json = nlohmann::json;

Json speculative_json(const SpeculativeArgs& s) {
  Json j = {{"method", to_string(s.method)},
            {"draft_in_target_checkpoint", s.draft_in_target_checkpoint},
            {"draft_sample_method",
             s.draft_sample_method == DraftSampling::kGreedy ? "greedy" : "probabilistic"},
            {"enable_adaptive_verification", s.enable_adaptive_verification},
            {"given", s.given}};
  auto put = [&j](const char* key, const auto& value) {
    if (value) j[key] = *value;
  };
  put("model", s.model);
  put("num_speculative_tokens", s.num_speculative_tokens);
  put("draft_tensor_parallel_size", s.draft_tensor_parallel_size);
  put("prompt_lookup_min", s.prompt_lookup_min);
  put("prompt_lookup_max", s.prompt_lookup_max);
  put("disable_by_batch_size", s.disable_by_batch_size);
  put("max_model_len", s.max_model_len);
  return j;
}

// The parsed configuration, logged at debug level. API keys are replaced by their count.
Json serve_args_to_json(const ServeArgs& a) {
  auto opt = [](const auto& value) -> Json { return value ? Json(*value) : Json(nullptr); };
  const char* dtype = a.model.dtype == ModelDtype::kAuto   ? "auto"
                      : a.model.dtype == ModelDtype::kBf16 ? "bfloat16"
                                                           : "float32";
  return {
      {"model",
       {{"path", a.model.path},
        {"dtype", dtype},
        {"max_model_len", opt(a.model.max_model_len)},
        {"tokenizer", opt(a.model.tokenizer)},
        {"hf_overrides", a.model.hf_overrides},
        {"generation_config", a.model.generation_config},
        {"override_generation_config", a.model.override_generation_config},
        {"seed", a.model.seed},
        {"max_logprobs", a.model.max_logprobs}}},
      {"parallel",
       {{"tensor_parallel_size", a.parallel.tensor_parallel_size},
        {"pipeline_parallel_size", a.parallel.pipeline_parallel_size},
        {"data_parallel_size", a.parallel.data_parallel_size},
        {"enable_expert_parallel", a.parallel.enable_expert_parallel}}},
      {"cache",
       {{"gpu_memory_utilization", a.cache.gpu_memory_utilization},
        {"kv_cache_memory_bytes", opt(a.cache.kv_cache_memory_bytes)},
        {"kv_cache_dtype", to_string(a.cache.kv_cache_dtype)},
        {"block_size", a.cache.block_size},
        {"enable_prefix_caching", a.cache.enable_prefix_caching},
        {"num_gpu_blocks_override", opt(a.cache.num_gpu_blocks_override)}}},
      {"scheduler",
       {{"max_num_batched_tokens", opt(a.scheduler.max_num_batched_tokens)},
        {"max_num_seqs", opt(a.scheduler.max_num_seqs)},
        {"enable_chunked_prefill", a.scheduler.enable_chunked_prefill},
        {"max_num_partial_prefills", a.scheduler.max_num_partial_prefills},
        {"max_long_partial_prefills", a.scheduler.max_long_partial_prefills},
        {"long_prefill_token_threshold", a.scheduler.long_prefill_token_threshold},
        {"scheduling_policy", a.scheduler.policy == SchedulingPolicy::kFcfs ? "fcfs" : "priority"},
        {"async_scheduling", a.scheduler.async_scheduling}}},
      {"speculative", speculative_json(a.speculative)},
      {"server",
       {{"host", opt(a.server.host)},
        {"port", a.server.port},
        {"served_model_names", a.server.served_model_names},
        {"api_keys", a.server.api_keys.size()},
        {"default_chat_template_kwargs", a.server.default_chat_template_kwargs},
        {"enable_auto_tool_choice", a.server.enable_auto_tool_choice},
        {"tool_call_parser", opt(a.server.tool_call_parser)},
        {"reasoning_parser", opt(a.server.reasoning_parser)},
        {"enable_prompt_tokens_details", a.server.enable_prompt_tokens_details},
        {"return_tokens_as_token_ids", a.server.return_tokens_as_token_ids},
        {"enable_log_requests", a.server.enable_log_requests},
        {"disable_log_stats", a.server.disable_log_stats}}},
      {"flint",
       {{"threads", a.flint.threads},
        {"log_level", a.flint.log_level},
        {"quant_simulation",
         a.flint.quant_simulation == QuantSimulation::kOfficial ? "official" : "off"}}},
  };
}

// Reads MODEL/config.json (with --hf-overrides merged, as the loader will) and checks the
// flags that depend on the checkpoint. Resolves a speculative method left to the checkpoint.
void check_checkpoint(ServeArgs& args) {
  namespace fs = std::filesystem;
  const std::string& dir = args.model.path;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    bool looks_like_hub_id = dir.find('/') != std::string::npos && dir.front() != '/' &&
                             dir.front() != '.' && std::count(dir.begin(), dir.end(), '/') == 1;
    throw Error("model directory '{}' does not exist{}", dir,
                looks_like_hub_id ? " (flint does not download from Hugging Face: pass the "
                                    "local directory of the checkpoint)"
                                  : "");
  }
  if (!fs::is_directory(dir, ec)) {
    throw Error(
        "'{}' is not a directory: MODEL is a checkpoint directory holding config.json, "
        "*.safetensors and tokenizer.json",
        dir);
  }
  fs::path config_path = fs::path(dir) / "config.json";
  std::ifstream file(config_path);
  if (!file) {
    throw Error("'{}' not found: MODEL must be a checkpoint directory with config.json",
                config_path.string());
  }
  Json config = Json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    throw Error("'{}' is not a JSON object", config_path.string());
  }
  config.merge_patch(args.model.hf_overrides);

  auto config_int = [&](const char* key) -> std::optional<int64_t> {
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int64_t>();
    return std::nullopt;
  };
  auto max_positions = config_int("max_position_embeddings");
  if (args.model.max_model_len && max_positions && *args.model.max_model_len > *max_positions) {
    throw Error("--max-model-len {} exceeds max_position_embeddings {} of '{}'",
                *args.model.max_model_len, *max_positions, config_path.string());
  }

  SpeculativeArgs& s = args.speculative;
  auto dspark_block = config_int("dspark_block_size");
  auto mtp_layers = config_int("num_nextn_predict_layers");
  if (s.method == SpecMethod::kAuto) {
    s.method = dspark_block                      ? SpecMethod::kDSpark
               : (mtp_layers && *mtp_layers > 0) ? SpecMethod::kMtp
                                                 : SpecMethod::kNone;
    if (s.method == SpecMethod::kNone) {
      throw Error(
          "--speculative-config: '{}' has neither DSpark stages (dspark_block_size) nor "
          "an MTP layer (num_nextn_predict_layers); give method ngram or drop the draft",
          config_path.string());
    }
    spdlog::info("--speculative-config: no method given; the checkpoint has {}, so method {}",
                 s.method == SpecMethod::kDSpark ? "DSpark stages" : "an MTP layer",
                 to_string(s.method));
  }
  if (s.method == SpecMethod::kDSpark && !dspark_block) {
    throw Error(
        "--speculative-config.method dspark: '{}' has no dspark_block_size, so the "
        "checkpoint has no DSpark stages (DeepSeek-V4-Flash-0731 has them); use method "
        "mtp",
        config_path.string());
  }
  if (s.method == SpecMethod::kMtp && !(mtp_layers && *mtp_layers > 0)) {
    throw Error(
        "--speculative-config.method {}: '{}' has no MTP layer "
        "(num_nextn_predict_layers)",
        s.method_name, config_path.string());
  }
  if (s.method == SpecMethod::kDSpark && s.num_speculative_tokens &&
      *s.num_speculative_tokens > *dspark_block) {
    throw Error(
        "--speculative-config.num_speculative_tokens {}: this DSpark draft drafts at most "
        "dspark_block_size = {} tokens per step ('{}')",
        *s.num_speculative_tokens, *dspark_block, config_path.string());
  }
  if (s.method == SpecMethod::kDSpark && s.num_speculative_tokens &&
      *s.num_speculative_tokens != *dspark_block) {
    spdlog::warn(
        "--speculative-config.num_speculative_tokens {}: this DSpark draft was trained "
        "with blocks of {} (dspark_block_size); shorter blocks draft less well",
        *s.num_speculative_tokens, *dspark_block);
  }
}

int serve_command(std::span<const std::string> argv) {
  ServeArgs args = parse_serve_args(argv);
  if (args.help) return kExitOk;
  init_logging(args.flint.log_level);
  spdlog::info("flint serve {}", args.model.path);
  for (const auto& line : explain_serve_args(args, read_machine_info())) {
    spdlog::info("{}", line);
  }
  check_checkpoint(args);
  spdlog::debug("configuration: {}", serve_args_to_json(args).dump());
  return run_serve(args);
}

}  // namespace

}  // namespace flint::cli

FLINT_COMMAND("serve", "serve a checkpoint over an OpenAI-compatible API (`vllm serve` flags)",
              flint::cli::serve_command);
