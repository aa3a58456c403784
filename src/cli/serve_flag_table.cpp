// The table of `flint serve` flags: one row per flag of `vllm serve` (and flint's own few)
// with its parser, what vLLM does with it and what flint does with it, plus the setters and
// start-up explanations the rows point to. serve_args.cpp turns the rows into the parser,
// --help, docs/cli.md and the start-up lines.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/strings.h"
#include "cli/flags.h"
#include "cli/serve_args_internal.h"

namespace flint::cli::serve_internal {

namespace {

// ---------------------------------------------------------------------------------------
// Value helpers

int64_t int_at_least(std::string_view flag, std::string_view text, int64_t min) {
  int64_t value = parse_int(flag, text);
  if (value < min) throw UsageError("{} must be at least {}, got {}", flag, min, value);
  return value;
}

int64_t size_at_least(std::string_view flag, std::string_view text, int64_t min) {
  int64_t value = parse_human_int(flag, text);
  if (value < min) throw UsageError("{} must be at least {}, got {}", flag, min, text);
  return value;
}

double non_negative(std::string_view flag, std::string_view text) {
  double value = parse_double(flag, text);
  if (value < 0) throw UsageError("{} must not be negative, got {}", flag, text);
  return value;
}

constexpr std::string_view kModel = "Model";
constexpr std::string_view kLoad = "Load";
constexpr std::string_view kParallel = "Parallel";
constexpr std::string_view kCache = "Cache";
constexpr std::string_view kScheduler = "Scheduler";
constexpr std::string_view kSpeculative = "Speculative";
constexpr std::string_view kFrontend = "Frontend";
constexpr std::string_view kGpuOnly = "GPU-only";
constexpr std::string_view kFlint = "flint";

using A = ServeArgs&;
using F = std::string_view;
using V = std::string_view;

std::string explain_tp(const ServeArgs& a, const MachineInfo& m) {
  return fmt::format("each layer split over {} MPI ranks of {} threads each",
                     a.parallel.tensor_parallel_size, effective_threads(a, m));
}

std::string explain_memory(const ServeArgs& a, const MachineInfo& m) {
  return fmt::format(
      "no GPU here: the fraction of RAM given to weights plus KV cache, {} x {} = {} "
      "(MemAvailable now {}){}",
      a.cache.gpu_memory_utilization, format_bytes(static_cast<double>(m.ram_bytes)),
      format_bytes(static_cast<double>(memory_budget_bytes(a, m))),
      format_bytes(static_cast<double>(m.available_bytes)),
      a.cache.kv_cache_memory_bytes ? "; --kv-cache-memory-bytes fixes the KV cache part" : "");
}

std::string explain_threads(const ServeArgs& a, const MachineInfo& m) {
  int64_t n = effective_threads(a, m);
  if (a.flint.threads == 0) {
    return fmt::format("{} worker threads, one per physical core this process may use", n);
  }
  return fmt::format(
      "{} worker threads{}", n,
      n > m.cores ? fmt::format(" (more than the {} cores available)", m.cores) : "");
}

std::string explain_api_key(const ServeArgs& a, const MachineInfo&) {
  return fmt::format(
      "every endpoint but /health and the chat page needs one of the {} key(s) given, as "
      "'Authorization: Bearer KEY' or 'x-api-key: KEY' (keys are never logged)",
      a.server.api_keys.size());
}

std::string explain_max_model_len(const ServeArgs& a, const MachineInfo&) {
  if (!a.model.max_model_len) {
    return "the longest context the model supports (max_position_embeddings of config.json)";
  }
  return fmt::format(
      "prompt plus output of a request may hold at most {} tokens; the KV cache "
      "is sized for it (checked against config.json at start)",
      *a.model.max_model_len);
}

std::string explain_kv_bytes(const ServeArgs& a, const MachineInfo&) {
  return fmt::format("the KV cache gets {} instead of its share of --gpu-memory-utilization",
                     format_bytes(static_cast<double>(a.cache.kv_cache_memory_bytes.value_or(0))));
}

std::string explain_tool_choice(const ServeArgs& a, const MachineInfo&) {
  return fmt::format(
      "the model may call tools on its own (tool_choice auto); its DSML tool "
      "calls are parsed with {}{}",
      a.server.tool_call_parser.value_or("deepseek_v4"),
      a.given.end() ==
              std::find_if(a.given.begin(), a.given.end(),
                           [](const GivenFlag& g) { return g.name == "--tool-call-parser"; })
          ? " (assumed: no --tool-call-parser given)"
          : "");
}

std::string explain_dtype(const ServeArgs& a, const MachineInfo&) {
  return a.model.dtype == ModelDtype::kF32
             ? "activations between layers are kept in float32"
             : "activations between layers are bfloat16 like DeepSeek's code; matmuls accumulate "
               "in float32";
}

std::string explain_kv_cache_dtype(const ServeArgs& a, const MachineInfo&) {
  if (a.cache.kv_cache_dtype == KvCacheDtype::kBf16) {
    return "KV entries are stored unrounded in bf16: twice the memory of fp8; it differs from fp8 "
           "only with --quant-simulation off";
  }
  return std::string(a.cache.kv_cache_dtype == KvCacheDtype::kAuto ? "DeepSeek-V4's default, "
                                                                   : "") +
         "the 448 non-RoPE dims of each KV entry are stored as FP8 e4m3 (blocks of 64, "
         "power-of-two scales), the rounding DeepSeek's code applies anyway, and the 64 RoPE "
         "dims in bf16";
}

std::string explain_quant_simulation(const ServeArgs& a, const MachineInfo&) {
  return a.flint.quant_simulation == QuantSimulation::kOfficial
             ? "activations are rounded like DeepSeek's inference code (FP8 blocks of 128 before "
               "linear layers, FP8 KV non-RoPE dims, FP4 indexer keys and queries)"
             : "the official activation roundings are skipped, like llama.cpp";
}

void set_dtype(A a, F f, V v) {
  std::string d = one_of(f, v, {"auto", "bfloat16", "bf16", "float32", "float", "half", "float16"});
  if (d == "half" || d == "float16") {
    throw UsageError(
        "{} {}: flint computes in bfloat16 and float32 only (DeepSeek-V4's "
        "checkpoints are bfloat16)",
        f, d);
  }
  a.model.dtype = d == "auto"                        ? ModelDtype::kAuto
                  : (d == "float32" || d == "float") ? ModelDtype::kF32
                                                     : ModelDtype::kBf16;
}

void set_kv_cache_dtype(A a, F f, V v) {
  static constexpr std::string_view kOthers[] = {"fp8_e5m2",
                                                 "fp8_inc",
                                                 "float16",
                                                 "nvfp4",
                                                 "nvfp4_ds_mla",
                                                 "fp8_per_token_head",
                                                 "int8_per_token_head",
                                                 "int4_per_token_head"};
  if (std::find(std::begin(kOthers), std::end(kOthers), v) != std::end(kOthers)) {
    throw UsageError(
        "{} {}: flint stores DeepSeek-V4's KV cache as fp8 (e4m3, the format of the "
        "official code) or bf16; use auto, fp8, fp8_e4m3, fp8_ds_mla, bf16 or "
        "bfloat16",
        f, v);
  }
  std::string d = one_of(f, v, {"auto", "fp8", "fp8_e4m3", "fp8_ds_mla", "bf16", "bfloat16"});
  a.cache.kv_cache_dtype = d == "auto"                        ? KvCacheDtype::kAuto
                           : (d == "bf16" || d == "bfloat16") ? KvCacheDtype::kBf16
                                                              : KvCacheDtype::kFp8E4m3;
}

void set_block_size(A a, F f, V v) {
  int64_t n = parse_int(f, v);
  constexpr int64_t unit = CacheArgs::kBlockSizeUnit;
  if (n <= 0 || n % unit != 0 || n > (int64_t{1} << 20)) {
    throw UsageError(
        "{} {}: flint needs a positive multiple of {} (DeepSeek-V4's largest "
        "compression ratio, so that a block holds whole compressed KV entries), "
        "at most {}; e.g. 128, 256 or 512",
        f, v, unit, int64_t{1} << 20);
  }
  a.cache.block_size = n;
}

void set_gpu_memory_utilization(A a, F f, V v) {
  double x = parse_double(f, v);
  if (!(x > 0 && x <= 1)) {
    throw UsageError("{} must be in (0, 1] (the fraction of RAM for weights plus KV cache), got {}",
                     f, v);
  }
  a.cache.gpu_memory_utilization = x;
}

void set_max_model_len(A a, F f, V v) {
  if (v == "auto" || v == "-1") {
    a.model.max_model_len.reset();
    return;
  }
  a.model.max_model_len = size_at_least(f, v, 1);
}

void set_port(A a, F f, V v) {
  int64_t port = parse_int(f, v);
  if (port < 0 || port > 65535) throw UsageError("{} must be in 0..65535, got {}", f, v);
  a.server.port = port;
}

void set_quantization(A a, F f, V v) {
  if (v == "None" || v == "none" || v == "auto") {
    a.model.quantization.reset();
    return;
  }
  if (v != "fp8") {
    throw UsageError(
        "{} {}: flint runs the checkpoint's own weights (FP8 e4m3 in 128x128 blocks, "
        "FP4 experts); only fp8, which matches them, is accepted",
        f, v);
  }
  a.model.quantization = std::string(v);
}

}  // namespace

// The table: one row per flag, grouped like vLLM's config groups. Keep rows of a group
// together: help() lists the groups in order of first appearance.
const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      // ---- Model
      {.name = "--model",
       .group = kModel,
       .value_name = "DIR",
       .vllm = "Model to serve; `vllm serve` prefers it as the first argument.",
       .status = Status::kApplied,
       .flint = "the checkpoint directory to serve, like the MODEL argument",
       .set = [](A a, F, V v) { a.model.path = std::string(v); }},
      {.name = "--trust-remote-code",
       .group = kModel,
       .kind = Kind::kSwitch,
       .vllm = "Run Python code shipped with a Hugging Face model.",
       .status = Status::kNotApplicable,
       .flint = "flint runs no Python: the DeepSeek-V4 architecture is built in",
       .set = [](A a, F f, V v) { a.model.trust_remote_code = parse_bool(f, v); }},
      {.name = "--dtype",
       .group = kModel,
       .value_name = "TYPE",
       .default_text = "auto",
       .vllm = "Type of weights and activations: auto, bfloat16, float16, float32.",
       .component = "model",
       .flint = "auto and bfloat16 keep activations between layers in bfloat16 like DeepSeek's "
                "code (matmuls accumulate in float32); float32 keeps them in float32; float16 is "
                "refused",
       .set = set_dtype,
       .explain = explain_dtype},
      {.name = "--max-model-len",
       .group = kModel,
       .value_name = "N|auto",
       .default_text = "auto",
       .vllm = "Longest context (prompt plus output) in tokens; 1k = 1000, 1K = 1024; auto or -1 "
               "= the model's maximum.",
       .status = Status::kApplied,
       .flint = "a request's prompt plus output holds at most that many tokens; it may not "
                "exceed max_position_embeddings of config.json",
       .set = set_max_model_len,
       .explain = explain_max_model_len},
      {.name = "--max-logprobs",
       .group = kModel,
       .value_name = "N",
       .default_text = "20",
       .vllm = "Most log-probabilities a request may ask for; -1 = no limit.",
       .status = Status::kApplied,
       .flint = "requests asking for more than {} logprobs are refused",
       .set = [](A a, F f, V v) { a.model.max_logprobs = int_at_least(f, v, -1); }},
      {.name = "--seed",
       .group = kModel,
       .value_name = "N",
       .default_text = "0",
       .vllm = "Seed of the random generators.",
       .status = Status::kApplied,
       .flint = "seeds the sampler's random generator with {}; a request's own seed still wins",
       .set = [](A a, F f, V v) { a.model.seed = parse_int(f, v); }},
      {.name = "--generation-config",
       .group = kModel,
       .value_name = "auto|vllm|DIR",
       .default_text = "auto",
       .vllm = "Default sampling parameters: auto = the model's generation_config.json, vllm = "
               "none, or that folder's file.",
       .status = Status::kApplied,
       .flint = "default sampling parameters come from the checkpoint's generation_config.json "
                "(auto), nowhere (vllm) or the folder given",
       .set = [](A a, F, V v) { a.model.generation_config = std::string(v); }},
      {.name = "--override-generation-config",
       .group = kModel,
       .kind = Kind::kConfig,
       .value_name = "JSON",
       .vllm = "JSON object overriding default sampling parameters, e.g. '{\"temperature\": 0.6}'.",
       .status = Status::kApplied,
       .flint = "merged over the default sampling parameters",
       .set_json =
           [](A a, F f, const Json& u) {
             merge_json_object(a.model.override_generation_config, f, u);
           },
       .shown = [](const ServeArgs& a) -> const Json& {
         return a.model.override_generation_config;
       }},
      {.name = "--hf-overrides",
       .group = kModel,
       .kind = Kind::kConfig,
       .value_name = "JSON",
       .vllm = "JSON object merged into the model's config.json.",
       .component = "model loader",
       .flint = "merged into config.json when the checkpoint is read",
       .set_json = [](A a, F f, const Json& u) { merge_json_object(a.model.hf_overrides, f, u); },
       .shown = [](const ServeArgs& a) -> const Json& { return a.model.hf_overrides; }},
      {.name = "--tokenizer",
       .group = kModel,
       .value_name = "DIR",
       .vllm = "Tokenizer name or folder (default: the model's).",
       .status = Status::kApplied,
       .flint = "tokenizer.json and tokenizer_config.json are read from {} instead of the "
                "checkpoint",
       .set = [](A a, F, V v) { a.model.tokenizer = std::string(v); }},
      {.name = "--tokenizer-mode",
       .group = kModel,
       .value_name = "MODE",
       .default_text = "auto",
       .vllm = "Tokenizer implementation: auto, hf, slow, mistral, deepseek_v4, ...",
       .status = Status::kNotApplicable,
       .flint = "flint has one tokenizer (byte-level BPE from tokenizer.json) and the built-in "
                "DeepSeek-V4 chat encoder; auto, hf, slow and deepseek_v4 all mean that",
       .set =
           [](A a, F f, V v) {
             a.model.tokenizer_mode = one_of(f, v, {"auto", "hf", "slow", "deepseek_v4"});
           }},
      {.name = "--revision",
       .group = kModel,
       .value_name = "REV",
       .vllm = "Hub branch, tag or commit to download.",
       .status = Status::kNotApplicable,
       .flint = "flint serves local directories and never downloads",
       .set = [](A a, F, V v) { a.model.revision = std::string(v); }},
      {.name = "--quantization",
       .aliases = "-q",
       .group = kModel,
       .value_name = "METHOD",
       .vllm = "Weight quantization method (default: quantization_config of config.json).",
       .status = Status::kNotApplicable,
       .flint = "flint runs the checkpoint's own FP8 (128x128 blocks, e8m0 scales) and FP4 "
                "expert weights; fp8 matches them, other methods are refused",
       .set = set_quantization},
      // ---- Load
      {.name = "--load-format",
       .group = kLoad,
       .value_name = "FORMAT",
       .default_text = "auto",
       .vllm = "Weight file format / loader: auto, safetensors, fastsafetensors, pt, gguf, ...",
       .status = Status::kNotApplicable,
       .flint = "flint memory-maps the checkpoint's safetensors files; auto, safetensors and "
                "fastsafetensors all mean that",
       .set =
           [](A a, F f, V v) {
             a.model.load_format = one_of(f, v, {"auto", "safetensors", "fastsafetensors"});
           }},
      {.name = "--download-dir",
       .group = kLoad,
       .value_name = "DIR",
       .vllm = "Where Hugging Face downloads go.",
       .status = Status::kNotApplicable,
       .flint = "flint never downloads: MODEL is a local directory",
       .set = [](A a, F, V v) { a.model.download_dir = std::string(v); }},
      // ---- Parallel
      {.name = "--tensor-parallel-size",
       .aliases = "-tp",
       .group = kParallel,
       .value_name = "N",
       .default_text = "1",
       .vllm = "Split every layer's weights over N GPUs.",
       .status = Status::kApplied,
       .flint = "flint splits every layer over {} MPI ranks (started by mpirun, or by flint "
                "itself through mpirun on this machine; docs/parallel.md)",
       .set = [](A a, F f, V v) { a.parallel.tensor_parallel_size = int_at_least(f, v, 1); },
       .explain = explain_tp},
      {.name = "--pipeline-parallel-size",
       .aliases = "-pp",
       .group = kParallel,
       .value_name = "N",
       .default_text = "1",
       .vllm = "Split the layers into N stages on different GPUs.",
       .component = "MPI launcher",
       .flint = "flint will split the layers into {} stages over MPI ranks; this process is a "
                "single rank and runs every layer",
       .set = [](A a, F f, V v) { a.parallel.pipeline_parallel_size = int_at_least(f, v, 1); }},
      {.name = "--data-parallel-size",
       .aliases = "-dp",
       .group = kParallel,
       .value_name = "N",
       .default_text = "1",
       .vllm = "Run N replicas of the model behind one endpoint.",
       .component = "MPI launcher",
       .flint = "flint will run {} replicas behind one endpoint; this process is one replica",
       .set = [](A a, F f, V v) { a.parallel.data_parallel_size = int_at_least(f, v, 1); }},
      {.name = "--enable-expert-parallel",
       .group = kParallel,
       .kind = Kind::kSwitch,
       .vllm = "Give each GPU whole MoE experts instead of a slice of every expert.",
       .status = Status::kApplied,
       .flint = "with several ranks each rank owns whole routed experts (without it, a slice "
                "of every expert); with one rank every expert is local",
       .set = [](A a, F f, V v) { a.parallel.enable_expert_parallel = parse_bool(f, v); }},
      {.name = "--enable-eplb",
       .group = kParallel,
       .kind = Kind::kSwitch,
       .vllm = "Expert-parallel load balancing: move hot experts between GPUs.",
       .status = Status::kNotApplicable,
       .flint = "flint does not move experts between ranks; with one rank every expert is local",
       .set = [](A a, F f, V v) { a.parallel.enable_eplb = parse_bool(f, v); }},
      {.name = "--distributed-executor-backend",
       .group = kParallel,
       .value_name = "BACKEND",
       .vllm = "How workers are started: ray, mp, uni, external_launcher.",
       .status = Status::kNotApplicable,
       .flint = "flint's ranks will be MPI processes started by mpirun, whatever the backend",
       .set =
           [](A a, F f, V v) {
             a.parallel.distributed_executor_backend =
                 one_of(f, v, {"ray", "mp", "uni", "external_launcher"});
           }},
      {.name = "--disable-custom-all-reduce",
       .group = kParallel,
       .kind = Kind::kSwitch,
       .vllm = "Use NCCL instead of vLLM's custom CUDA all-reduce kernel.",
       .status = Status::kNotApplicable,
       .flint = "there is no CUDA all-reduce to disable: flint will reduce across ranks with MPI",
       .set = [](A a, F f, V v) { a.parallel.disable_custom_all_reduce = parse_bool(f, v); }},
      // ---- Cache
      {.name = "--gpu-memory-utilization",
       .group = kCache,
       .value_name = "X",
       .default_text = "0.9",
       .vllm = "Fraction of GPU memory for weights, activations and KV cache, in (0, 1].",
       .status = Status::kApplied,
       .flint = "no GPU here: the fraction {} of RAM given to weights plus KV cache",
       .set = set_gpu_memory_utilization,
       .explain = explain_memory},
      {.name = "--kv-cache-memory-bytes",
       .group = kCache,
       .value_name = "BYTES",
       .vllm = "KV cache size per GPU in bytes (8G, 512M, ...); overrides "
               "--gpu-memory-utilization for the KV cache.",
       .status = Status::kApplied,
       .flint = "the KV cache gets {} bytes whatever --gpu-memory-utilization says",
       .set = [](A a, F f, V v) { a.cache.kv_cache_memory_bytes = size_at_least(f, v, 1); },
       .explain = explain_kv_bytes},
      {.name = "--kv-cache-dtype",
       .group = kCache,
       .value_name = "TYPE",
       .default_text = "auto",
       .vllm = "Storage type of the KV cache (auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, ...).",
       .status = Status::kApplied,
       .flint = "auto and fp8 (fp8_e4m3, fp8_ds_mla) store the 448 non-RoPE dims of each KV "
                "entry as FP8 e4m3 in blocks of 64 with power-of-two scales, as DeepSeek's code "
                "rounds them anyway, and the 64 RoPE dims in bf16; bf16 stores everything "
                "unrounded (twice the memory; it differs only with --quant-simulation off)",
       .set = set_kv_cache_dtype,
       .explain = explain_kv_cache_dtype},
      {.name = "--block-size",
       .group = kCache,
       .value_name = "N",
       .default_text = "256",
       .vllm = "Tokens per KV cache block.",
       .status = Status::kApplied,
       .flint = "{} tokens per KV block: a positive multiple of 128, DeepSeek-V4's largest "
                "compression ratio, so a block holds whole compressed entries and prefix hits "
                "end where every cache kind is complete",
       .set = set_block_size},
      {.name = "--enable-prefix-caching",
       .group = kCache,
       .kind = Kind::kSwitch,
       .default_text = "true",
       .vllm = "Reuse the KV blocks of identical prompt prefixes (on by default; "
               "--no-enable-prefix-caching turns it off).",
       .status = Status::kApplied,
       .flint = "requests sharing a prompt prefix reuse its cached KV blocks",
       .set = [](A a, F f, V v) { a.cache.enable_prefix_caching = parse_bool(f, v); }},
      {.name = "--num-gpu-blocks-override",
       .group = kCache,
       .value_name = "N",
       .vllm = "Allocate exactly N KV blocks instead of what memory allows (for tests).",
       .status = Status::kApplied,
       .flint = "the KV cache holds exactly {} blocks",
       .set = [](A a, F f, V v) { a.cache.num_gpu_blocks_override = int_at_least(f, v, 1); }},
      {.name = "--swap-space",
       .group = kCache,
       .value_name = "GIB",
       .default_text = "4",
       .vllm = "CPU RAM (GiB) per GPU to swap preempted requests' KV blocks to.",
       .status = Status::kNotApplicable,
       .flint = "flint's KV cache already lives in RAM: there is nowhere to swap to",
       .set = [](A a, F f, V v) { a.cache.swap_space_gib = non_negative(f, v); }},
      {.name = "--cpu-offload-gb",
       .group = kCache,
       .value_name = "GIB",
       .default_text = "0",
       .vllm = "GiB of weights per GPU kept in CPU RAM and streamed in for each step.",
       .status = Status::kNotApplicable,
       .flint = "the weights already live in RAM (memory-mapped)",
       .set = [](A a, F f, V v) { a.cache.cpu_offload_gib = non_negative(f, v); }},
      {.name = "--kv-offloading-size",
       .group = kCache,
       .value_name = "GIB",
       .vllm = "GiB of CPU RAM as a second tier for KV blocks evicted from the GPU.",
       .status = Status::kApplied,
       .flint = "the KV cache is in RAM already, so its second tier is {} GiB of local disk "
                "(--kv-offloading-dir): cached blocks evicted from RAM are written there by a "
                "background thread and read back on a prefix hit instead of recomputed",
       .set = [](A a, F f, V v) { a.cache.kv_offloading_size_gib = non_negative(f, v); }},
      {.name = "--kv-offloading-backend",
       .group = kCache,
       .value_name = "native|lmcache",
       .default_text = "native",
       .vllm = "Who moves offloaded KV blocks: native or lmcache.",
       .status = Status::kApplied,
       .flint = "{}: flint's own disk tier (docs/engine.md)",
       .set =
           [](A a, F f, V v) {
             a.cache.kv_offloading_backend = one_of(f, v, {"native", "lmcache"});
             // LMCache is a Python service for GPU engines; there is nothing to connect to.
             if (a.cache.kv_offloading_backend == "lmcache") {
               throw UsageError(
                   "{} lmcache is not available in flint: its native backend is "
                   "the disk tier (--kv-offloading-dir)",
                   f);
             }
           }},
      {.name = "--kv-offloading-dir",
       .group = kCache,
       .value_name = "DIR",
       .status = Status::kApplied,
       .flint = "the disk tier keeps its block files in {} (default: $XDG_CACHE_HOME/flint/kv "
                "or ~/.cache/flint/kv); they survive a restart and are checked before use",
       .set = [](A a, F, V v) { a.cache.kv_offloading_dir = std::string(v); }},
      // ---- Scheduler
      {.name = "--max-num-batched-tokens",
       .group = kScheduler,
       .value_name = "N",
       .default_text = "2048",
       .vllm = "Token budget of one engine step (prompt chunks plus decoded tokens); on a CPU "
               "2048 for the server by default.",
       .status = Status::kApplied,
       .flint = "each engine step runs at most {} tokens (default 2048, as vLLM on a CPU; "
                "without chunked prefill at least --max-model-len)",
       .set = [](A a, F f, V v) { a.scheduler.max_num_batched_tokens = size_at_least(f, v, 1); }},
      {.name = "--max-num-seqs",
       .group = kScheduler,
       .value_name = "N",
       .vllm = "Most requests running in one step.",
       .status = Status::kApplied,
       .flint = "at most {} requests run together; the others wait in the queue",
       .set = [](A a, F f, V v) { a.scheduler.max_num_seqs = int_at_least(f, v, 1); }},
      {.name = "--enable-chunked-prefill",
       .group = kScheduler,
       .kind = Kind::kSwitch,
       .default_text = "true",
       .vllm = "Split long prompts into chunks that share steps with decoding.",
       .status = Status::kApplied,
       .flint = "long prompts are prefilled in chunks that fit the step's token budget",
       .set = [](A a, F f, V v) { a.scheduler.enable_chunked_prefill = parse_bool(f, v); }},
      {.name = "--max-num-partial-prefills",
       .group = kScheduler,
       .value_name = "N",
       .default_text = "1",
       .vllm = "How many prompts may be partly prefilled at once.",
       .component = "scheduler",
       .flint = "at most {} prompts are partly prefilled at once",
       .set = [](A a, F f, V v) { a.scheduler.max_num_partial_prefills = int_at_least(f, v, 1); }},
      {.name = "--max-long-partial-prefills",
       .group = kScheduler,
       .value_name = "N",
       .default_text = "1",
       .vllm = "How many of those may be long prompts.",
       .component = "scheduler",
       .flint = "at most {} of them are long prompts",
       .set = [](A a, F f, V v) { a.scheduler.max_long_partial_prefills = int_at_least(f, v, 1); }},
      {.name = "--long-prefill-token-threshold",
       .group = kScheduler,
       .value_name = "N",
       .default_text = "0",
       .vllm = "A prompt longer than this is long (0 = 4% of --max-model-len).",
       .component = "scheduler",
       .flint = "prompts longer than {} tokens count as long",
       .set = [](A a, F f,
                 V v) { a.scheduler.long_prefill_token_threshold = size_at_least(f, v, 0); }},
      {.name = "--scheduling-policy",
       .group = kScheduler,
       .value_name = "fcfs|priority",
       .default_text = "fcfs",
       .vllm = "Order of waiting requests: first come first served, or the request's priority.",
       .component = "scheduler",
       .flint = "waiting requests are served in {} order",
       .set =
           [](A a, F f, V v) {
             a.scheduler.policy = one_of(f, v, {"fcfs", "priority"}) == "fcfs"
                                      ? SchedulingPolicy::kFcfs
                                      : SchedulingPolicy::kPriority;
           }},
      {.name = "--async-scheduling",
       .group = kScheduler,
       .kind = Kind::kSwitch,
       .vllm = "Schedule step n+1 while the GPU runs step n.",
       .component = "engine",
       .flint = "the next step is planned while the current one runs",
       .set = [](A a, F f, V v) { a.scheduler.async_scheduling = parse_bool(f, v); }},
      // ---- Speculative
      {.name = "--speculative-config",
       .group = kSpeculative,
       .kind = Kind::kConfig,
       .value_name = "JSON",
       .vllm = "Speculative decoding as a JSON object or --speculative-config.KEY VALUE: method "
               "(dspark, mtp, deepseek_mtp, ngram, eagle, ...), model, num_speculative_tokens, "
               "... (keys below).",
       .status = Status::kApplied,
       .flint = "dspark, mtp / deepseek_mtp and ngram, drafting from the served checkpoint; "
                "other methods and separate draft models are refused (docs/speculative.md)",
       .set_json =
           [](A a, F f, const Json& update) {
             if (!update.is_object()) {
               throw UsageError(
                   "{} expects a JSON object such as '{{\"method\": \"dspark\"}}', got {}", f,
                   update.dump());
             }
             for (const auto& [key, value] : update.items()) {
               apply_spec_key(a.speculative, key, value);
             }
           },
       .shown = [](const ServeArgs& a) -> const Json& { return a.speculative.given; },
       .explain = explain_speculative},
      // ---- Frontend
      {.name = "--host",
       .group = kFrontend,
       .value_name = "ADDR",
       .default_text = "127.0.0.1",
       .vllm = "Address to listen on (default: every interface).",
       .status = Status::kApplied,
       .flint = "the API listens on {} (default 127.0.0.1, this machine only: give 0.0.0.0 "
                "to serve other machines)",
       .set = [](A a, F, V v) { a.server.host = std::string(v); }},
      {.name = "--port",
       .group = kFrontend,
       .value_name = "N",
       .default_text = "8000",
       .vllm = "Port to listen on.",
       .status = Status::kApplied,
       .flint = "the API listens on port {} (0: any free port, logged at start)",
       .set = set_port},
      {.name = "--served-model-name",
       .group = kFrontend,
       .kind = Kind::kList,
       .value_name = "NAME",
       .vllm = "Model names the API answers to; the first is reported (default: MODEL).",
       .status = Status::kApplied,
       .flint = "the API answers to the model names {}",
       .set_list = [](A a, F,
                      std::vector<std::string> v) { a.server.served_model_names = std::move(v); }},
      {.name = "--api-key",
       .group = kFrontend,
       .kind = Kind::kList,
       .value_name = "KEY",
       .vllm = "Require one of these keys as 'Authorization: Bearer KEY' on /v1 endpoints.",
       .status = Status::kApplied,
       .flint = "requests must carry one of the keys",
       .set_list =
           [](A a, F f, std::vector<std::string> v) {
             for (const auto& key : v) {
               if (key.empty()) throw UsageError("{}: an API key may not be empty", f);
             }
             a.server.api_keys = std::move(v);
           },
       .explain = explain_api_key,
       .secret = true},
      {.name = "--chat-template",
       .group = kFrontend,
       .value_name = "FILE|TEXT",
       .vllm = "Jinja chat template (a file or the template itself).",
       .status = Status::kNotApplicable,
       .flint = "DeepSeek-V4 ships no Jinja template: flint renders chats with its built-in "
                "DeepSeek-V4 encoder and runs no Jinja, so the template is not used",
       .set = [](A a, F, V v) { a.server.chat_template = std::string(v); }},
      {.name = "--chat-template-content-format",
       .group = kFrontend,
       .value_name = "auto|string|openai",
       .default_text = "auto",
       .vllm = "How message content is handed to the template.",
       .status = Status::kNotApplicable,
       .flint = "the built-in encoder takes both string and list-of-parts content",
       .set =
           [](A a, F f, V v) {
             a.server.chat_template_content_format = one_of(f, v, {"auto", "string", "openai"});
           }},
      {.name = "--default-chat-template-kwargs",
       .group = kFrontend,
       .kind = Kind::kConfig,
       .value_name = "JSON",
       .vllm = "chat_template_kwargs applied to every request, e.g. '{\"thinking\": true}'.",
       .status = Status::kApplied,
       .flint = "defaults for the encoder's options (thinking mode, reasoning effort); a "
                "request's own chat_template_kwargs win",
       .set_json =
           [](A a, F f, const Json& u) {
             merge_json_object(a.server.default_chat_template_kwargs, f, u);
           },
       .shown = [](const ServeArgs& a) -> const Json& {
         return a.server.default_chat_template_kwargs;
       }},
      {.name = "--response-role",
       .group = kFrontend,
       .value_name = "ROLE",
       .default_text = "assistant",
       .vllm = "Role of the reply when add_generation_prompt is true.",
       .component = "HTTP server",
       .flint = "replies carry the role {}",
       .set = [](A a, F, V v) { a.server.response_role = std::string(v); }},
      {.name = "--enable-auto-tool-choice",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "Let the model decide to call tools (tool_choice auto); needs --tool-call-parser.",
       .status = Status::kApplied,
       .flint = "the model may call tools on its own; deepseek_v4 is assumed when no "
                "--tool-call-parser is given",
       .set = [](A a, F f, V v) { a.server.enable_auto_tool_choice = parse_bool(f, v); },
       .explain = explain_tool_choice},
      {.name = "--tool-call-parser",
       .group = kFrontend,
       .value_name = "deepseek_v4",
       .vllm = "Parser turning model output into OpenAI tool calls.",
       .status = Status::kApplied,
       .flint = "DeepSeek-V4's DSML tool-call markup becomes tool_calls (the only parser)",
       .set = [](A a, F f, V v) { a.server.tool_call_parser = one_of(f, v, {"deepseek_v4"}); }},
      {.name = "--reasoning-parser",
       .group = kFrontend,
       .value_name = "deepseek_v4",
       .vllm = "Parser splitting reasoning from the answer.",
       .status = Status::kApplied,
       .flint = "the text inside <think>...</think> becomes reasoning_content (the only parser)",
       .set = [](A a, F f, V v) { a.server.reasoning_parser = one_of(f, v, {"deepseek_v4"}); }},
      {.name = "--enable-prompt-tokens-details",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "Report usage.prompt_tokens_details (cached prompt tokens).",
       .status = Status::kApplied,
       .flint = "usage reports how many prompt tokens came from the prefix cache",
       .set = [](A a, F f, V v) { a.server.enable_prompt_tokens_details = parse_bool(f, v); }},
      {.name = "--return-tokens-as-token-ids",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "Write logprob tokens as 'token_id:N'.",
       .component = "HTTP server",
       .flint = "logprob tokens are written as 'token_id:N'",
       .set = [](A a, F f, V v) { a.server.return_tokens_as_token_ids = parse_bool(f, v); }},
      {.name = "--enable-force-include-usage",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "Include usage in every response, streamed ones too.",
       .component = "HTTP server",
       .flint = "every response, streamed or not, carries usage",
       .set = [](A a, F f, V v) { a.server.enable_force_include_usage = parse_bool(f, v); }},
      {.name = "--uvicorn-log-level",
       .group = kFrontend,
       .value_name = "LEVEL",
       .default_text = "info",
       .vllm = "Log level of the HTTP server (uvicorn).",
       .component = "HTTP server",
       .flint = "the HTTP server logs at level {}",
       .set =
           [](A a, F f, V v) {
             a.server.uvicorn_log_level =
                 one_of(f, v, {"critical", "error", "warning", "info", "debug", "trace"});
           }},
      {.name = "--disable-uvicorn-access-log",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "No line per HTTP request.",
       .component = "HTTP server",
       .flint = "no access-log line per HTTP request",
       .set = [](A a, F f, V v) { a.server.disable_uvicorn_access_log = parse_bool(f, v); }},
      {.name = "--enable-log-requests",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "Log every request (prompt and parameters).",
       .status = Status::kApplied,
       .flint = "every request is logged with its parameters",
       .set = [](A a, F f, V v) { a.server.enable_log_requests = parse_bool(f, v); }},
      {.name = "--disable-log-requests",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "Deprecated opposite of --enable-log-requests.",
       .status = Status::kApplied,
       .flint = "requests are not logged (the default)",
       .set = [](A a, F f, V v) { a.server.enable_log_requests = !parse_bool(f, v); }},
      {.name = "--max-log-len",
       .group = kFrontend,
       .value_name = "N",
       .vllm = "Longest prompt excerpt written to the log.",
       .component = "HTTP server",
       .flint = "logged prompts are cut to {} characters",
       .set = [](A a, F f, V v) { a.server.max_log_len = int_at_least(f, v, 0); }},
      {.name = "--disable-log-stats",
       .group = kFrontend,
       .kind = Kind::kSwitch,
       .vllm = "No periodic throughput and cache statistics in the log.",
       .status = Status::kApplied,
       .flint = "no periodic throughput and cache statistics in the log",
       .set = [](A a, F f, V v) { a.server.disable_log_stats = parse_bool(f, v); }},
      {.name = "--max-waiting-requests",
       .group = kFrontend,
       .value_name = "N",
       .default_text = "0",
       .status = Status::kApplied,
       .flint = "at most {} requests wait for a seat in the engine; more are answered 429 "
                "(0: no bound)",
       .set = [](A a, F f, V v) { a.server.max_waiting_requests = int_at_least(f, v, 0); }},
      {.name = "--shutdown-timeout",
       .group = kFrontend,
       .value_name = "SECONDS",
       .default_text = "30",
       .status = Status::kApplied,
       .flint = "on SIGTERM or SIGINT, running requests get {} s to finish (new ones are "
                "refused) before they are aborted and flint exits 0",
       .set = [](A a, F f, V v) { a.server.shutdown_timeout = non_negative(f, v); }},
      // ---- GPU-only
      {.name = "--enforce-eager",
       .group = kGpuOnly,
       .kind = Kind::kSwitch,
       .vllm = "Never capture CUDA graphs.",
       .status = Status::kNotApplicable,
       .flint = "there are no CUDA graphs on CPU",
       .set = [](A a, F f, V v) { a.gpu_only.enforce_eager = parse_bool(f, v); }},
      {.name = "--optimization-level",
       .aliases = "-O",
       .group = kGpuOnly,
       .value_name = "0-3",
       .vllm = "torch.compile / CUDA graph effort (-O0 .. -O3).",
       .status = Status::kNotApplicable,
       .flint = "flint's kernels are compiled ahead of time (C++, -march=native); nothing is "
                "compiled at start",
       .set =
           [](A a, F f, V v) {
             int64_t level = int_at_least(f, v, 0);
             if (level > 3) throw UsageError("{} must be 0, 1, 2 or 3, got {}", f, v);
             a.gpu_only.optimization_level = level;
           }},
      {.name = "--compilation-config",
       .group = kGpuOnly,
       .kind = Kind::kConfig,
       .value_name = "JSON",
       .vllm = "torch.compile and CUDA graph settings (JSON, or a level 0-3).",
       .status = Status::kNotApplicable,
       .flint = "flint compiles nothing at start and captures no CUDA graphs",
       .set_json =
           [](A a, F f, const Json& update) {
             if (update.is_number_integer()) {  // vLLM's older form: an optimisation level
               int64_t level = update.get<int64_t>();
               if (level < 0 || level > 3)
                 throw UsageError("{} level must be 0..3, got {}", f, level);
               a.gpu_only.optimization_level = level;
               return;
             }
             merge_json_object(a.gpu_only.compilation_config, f, update);
           },
       .shown = [](const ServeArgs& a) -> const Json& { return a.gpu_only.compilation_config; }},
      {.name = "--max-cudagraph-capture-size",
       .group = kGpuOnly,
       .value_name = "N",
       .vllm = "Largest batch captured as a CUDA graph.",
       .status = Status::kNotApplicable,
       .flint = "there are no CUDA graphs on CPU",
       .set = [](A a, F f, V v) { a.gpu_only.max_cudagraph_capture_size = int_at_least(f, v, 0); }},
      {.name = "--attention-backend",
       .group = kGpuOnly,
       .value_name = "NAME",
       .vllm = "GPU attention kernels (FLASH_ATTN, FLASHINFER_MLA, ...).",
       .status = Status::kNotApplicable,
       .flint = "flint has one CPU attention implementation for DeepSeek-V4",
       .set = [](A a, F, V v) { a.gpu_only.attention_backend = std::string(v); }},
      {.name = "--kv-transfer-config",
       .group = kGpuOnly,
       .kind = Kind::kConfig,
       .value_name = "JSON",
       .vllm = "Connector moving KV caches between prefill and decode instances.",
       .status = Status::kNotApplicable,
       .flint = "flint has no KV transfer connector: one process prefills and decodes",
       .set_json = [](A a, F f,
                      const Json& u) { merge_json_object(a.gpu_only.kv_transfer_config, f, u); },
       .shown = [](const ServeArgs& a) -> const Json& { return a.gpu_only.kv_transfer_config; }},
      // ---- flint
      {.name = "--threads",
       .group = kFlint,
       .value_name = "N",
       .default_text = "0",
       .status = Status::kApplied,
       .flint = "worker threads for the kernels; 0 = one per physical core",
       .set = [](A a, F f, V v) { a.flint.threads = int_at_least(f, v, 0); },
       .explain = explain_threads},
      {.name = "--log-level",
       .group = kFlint,
       .value_name = "LEVEL",
       .default_text = "info",
       .status = Status::kApplied,
       .flint = "flint logs at level {} (trace, debug, info, warning, error, critical, off)",
       .set =
           [](A a, F f, V v) {
             a.flint.log_level = one_of(
                 f, v, {"trace", "debug", "info", "warning", "warn", "error", "critical", "off"});
           }},
      {.name = "--quant-simulation",
       .group = kFlint,
       .value_name = "official|off",
       .default_text = "official",
       .status = Status::kApplied,
       .flint = "official rounds activations like DeepSeek's inference code (FP8 blocks of 128 "
                "before linear layers, FP8 for the KV's non-RoPE dims, FP4 indexer keys and "
                "queries); off skips those roundings, like llama.cpp",
       .set =
           [](A a, F f, V v) {
             a.flint.quant_simulation = one_of(f, v, {"official", "off"}) == "official"
                                            ? QuantSimulation::kOfficial
                                            : QuantSimulation::kOff;
           },
       .explain = explain_quant_simulation},
      {.name = "--enable-debug-replay",
       .group = kFlint,
       .kind = Kind::kSwitch,
       .status = Status::kApplied,
       .flint = "requests may carry \"flint_debug_replay\": [token ids] that replace the "
                "model's output (to test tool-call and reasoning parsing end to end; never in "
                "production)",
       .set = [](A a, F f, V v) { a.flint.enable_debug_replay = parse_bool(f, v); }},
      {.name = "--collective-timeout",
       .group = kFlint,
       .value_name = "SECONDS",
       .default_text = "300",
       .status = Status::kApplied,
       .flint = "with several ranks, a collective (or start-up) that waits longer than {} s "
                "prints which ranks arrived, which did not and where each waits, then stops "
                "every rank with a non-zero status",
       .set = [](A a, F f,
                 V v) { a.flint.collective_timeout = static_cast<double>(int_at_least(f, v, 1)); }},
      {.name = "--debug-fault",
       .group = kFlint,
       .value_name = "RANK:ACTION:STEP",
       .status = Status::kApplied,
       .flint = "failure tests only: rank RANK fails, stalls or dies (ACTION fail|stall|die) at "
                "engine step STEP or at start-up (STEP start-up)",
       .set = [](A a, F, V v) { a.flint.debug_fault = std::string(v); }},
  };
  return table;
}

}  // namespace flint::cli::serve_internal
