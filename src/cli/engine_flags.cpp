#include "cli/engine_flags.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/strings.h"
#include "cli/serve_args.h"
#include "cli/serve_args_internal.h"
#include "engine/engine_core.h"
#include "kv/kv_layout.h"

namespace flint::cli {

kernels::KvDtype parse_kv_cache_dtype(const std::string& text) {
  if (text == "auto" || text == "fp8" || text == "fp8_e4m3" || text == "fp8_ds_mla")
    return kernels::KvDtype::kFp8;
  if (text == "bf16" || text == "bfloat16") return kernels::KvDtype::kBf16;
  if (text == "float32" || text == "fp32") return kernels::KvDtype::kF32;
  throw UsageError("--kv-cache-dtype must be auto, fp8, bf16 or float32, got '{}'", text);
}

std::string default_kv_offloading_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return (std::filesystem::path(xdg) / "flint" / "kv").string();
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "flint" / "kv")
      .string();
}

void EngineFlags::add_to(FlagParser& p) {
  p.group("Engine");
  p.add_int("--max-num-seqs", "sequences running at once at most", &max_num_seqs);
  p.add_optional_int("--max-num-batched-tokens",
                     "tokens computed per engine step at most (default 2048; without chunked "
                     "prefill at least --max-model-len)",
                     &max_num_batched_tokens);
  p.add_bool("--enable-chunked-prefill",
             "split long prompts over several steps (decodes keep running between chunks)",
             &enable_chunked_prefill);
  p.add_int("--max-model-len", "prompt plus output tokens of a request at most; 0 = the model's",
            &max_model_len);
  p.add_int("--block-size", "tokens per KV block (a multiple of 128)", &block_size);
  p.add_string("--kv-cache-dtype", "auto (= fp8), fp8, bf16 or float32", &kv_cache_dtype);
  p.add_optional_int("--kv-cache-memory-bytes", "bytes of the KV cache (else from the fraction)",
                     &kv_cache_memory_bytes);
  p.add_double("--gpu-memory-utilization", "fraction of RAM for the weights plus the KV cache",
               &gpu_memory_utilization);
  p.add_bool("--enable-prefix-caching", "reuse the KV of identical prompt prefixes",
             &enable_prefix_caching);
  p.add_optional_double("--kv-offloading-size",
                        "GiB of local disk for KV blocks evicted from RAM (0 or unset: none)",
                        &kv_offloading_size);
  p.add_string("--kv-offloading-dir",
               "where the disk tier keeps its files (default: $XDG_CACHE_HOME/flint/kv, else "
               "~/.cache/flint/kv)",
               &kv_offloading_dir);
  p.add_int("--max-logprobs", "largest logprobs a request may ask for (-1: no limit)",
            &max_logprobs);
  p.add_int("--engine-seed", "seed of requests that give none", &seed);
  p.add_json("--speculative-config",
             "speculative decoding, as `flint serve` takes it (method dspark, mtp or ngram; "
             "num_speculative_tokens; draft_sample_method; enable_adaptive_verification; ...)",
             [this](const nlohmann::json& update) {
               if (!update.is_object()) {
                 throw UsageError("--speculative-config expects a JSON object, got {}",
                                  update.dump());
               }
               for (const auto& [key, value] : update.items())
                 serve_internal::apply_spec_key(speculative, key, value);
             });
}

void EngineFlags::resolve_speculative(const std::string& model_dir) {
  serve_internal::resolve_speculative(speculative, model_dir);
}

engine::EngineConfig EngineFlags::config(const dsv4::Config& model,
                                         int64_t checkpoint_bytes) const {
  engine::EngineConfig c;
  c.max_num_seqs = max_num_seqs;
  c.enable_chunked_prefill = enable_chunked_prefill;
  c.max_model_len = max_model_len > 0 ? max_model_len : model.max_position_embeddings;
  // As vLLM: without chunked prefill a whole prompt must fit one step.
  c.max_num_batched_tokens = max_num_batched_tokens.value_or(
      enable_chunked_prefill ? c.max_num_batched_tokens
                             : std::max(c.max_num_batched_tokens, c.max_model_len));
  c.block_size = block_size;
  c.kv_dtype = parse_kv_cache_dtype(kv_cache_dtype);
  c.enable_prefix_caching = enable_prefix_caching;
  c.max_logprobs = max_logprobs;
  c.seed = static_cast<uint64_t>(seed);
  c.kv_offloading_gib = kv_offloading_size;
  c.kv_offloading_dir = kv_offloading_dir.empty() ? default_kv_offloading_dir() : kv_offloading_dir;
  c.speculative = engine_speculative(speculative, model);
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1)) {
    throw UsageError("--gpu-memory-utilization must be in (0, 1], got {}", gpu_memory_utilization);
  }
  if (kv_cache_memory_bytes) {
    c.kv_cache_bytes = *kv_cache_memory_bytes;
  } else {
    const MachineInfo machine = read_machine_info();
    c.kv_cache_bytes = static_cast<int64_t>(gpu_memory_utilization *
                                            static_cast<double>(machine.ram_bytes)) -
                       checkpoint_bytes;
    // More than every seat at full length can use is never touched; map only that.
    const kv::KvLayout l = kv::make_kv_layout(model, c.block_size, c.kv_dtype);
    const int64_t most = (c.max_num_seqs * l.pages_for_tokens(c.max_model_len) +
                          (c.max_num_batched_tokens / l.block_size + 2) * l.num_layers) *
                         l.page_bytes;
    c.kv_cache_bytes = std::min(c.kv_cache_bytes, most);
    if (c.kv_cache_bytes <= 0) {
      throw Error(
          "no memory left for the KV cache: --gpu-memory-utilization {} of {} is {}, the "
          "weights take {}",
          gpu_memory_utilization, format_bytes(static_cast<double>(machine.ram_bytes)),
          format_bytes(gpu_memory_utilization * static_cast<double>(machine.ram_bytes)),
          format_bytes(static_cast<double>(checkpoint_bytes)));
    }
  }
  return c;
}

void SamplingFlags::add_to(FlagParser& p) {
  p.group("Sampling");
  p.add_double("--temperature", "0 = greedy", &params.temperature);
  p.add_double("--top-p", "nucleus sampling mass in (0, 1]", &params.top_p);
  p.add_int("--top-k", "keep the k most likely tokens (0 or -1 = all)", &params.top_k);
  p.add_double("--min-p", "drop tokens below min-p x the most likely one's probability",
               &params.min_p);
  p.add_double("--presence-penalty", "in [-2, 2]", &params.presence_penalty);
  p.add_double("--frequency-penalty", "in [-2, 2]", &params.frequency_penalty);
  p.add_double("--repetition-penalty", "> 0; 1 = none", &params.repetition_penalty);
  p.add_custom(
      "--seed", "sampling seed (a seeded request is reproducible)", true,
      [this](std::string_view v) {
        params.seed = static_cast<uint64_t>(parse_int("--seed", v));
      },
      "N");
  p.add_optional_int("--max-tokens",
                     params.max_tokens
                         ? fmt::format("tokens to generate at most (default: {})", *params.max_tokens)
                         : std::string("tokens to generate at most (default: up to --max-model-len)"),
                     &params.max_tokens);
  p.alias("-n", "--max-tokens");
  p.add_int("--min-tokens", "generate at least this many before EOS or a stop token",
            &params.min_tokens);
  p.add_bool("--ignore-eos", "keep generating after the end-of-sentence token", &params.ignore_eos);
  p.add_list(
      "--stop", "stop strings (the output ends before them)",
      [this](std::vector<std::string> v) {
        params.stop.insert(params.stop.end(), v.begin(), v.end());
      },
      "TEXT");
  p.add_list(
      "--stop-token-ids", "token ids that end the output",
      [this](std::vector<std::string> v) {
        for (const auto& s : v) {
          for (int64_t id : parse_int_list(s, "--stop-token-ids"))
            params.stop_token_ids.push_back(static_cast<int32_t>(id));
        }
      },
      "IDS");
  p.add_optional_int("--logprobs", "report each token's logprob and the N most likely",
                     &params.logprobs);
  p.add_int("--n", "samples per prompt", &params.n);
}

}  // namespace flint::cli
