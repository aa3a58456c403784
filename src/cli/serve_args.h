// The `flint serve` command line, compatible with `vllm serve`, parsed into typed structs.
//
// One table in serve_flag_table.cpp declares every flag: its parser, what vLLM does with it and
// what flint does with it. `flint serve --help`, docs/cli.md (`--help=markdown`) and the
// start-up log lines (explain_serve_args) are all rendered from that table.
//
// Parsing is pure (no files are read, nothing is logged) apart from comparing the draft
// model path with the served one on the file system; cmd_serve.cpp checks the checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_config.h"
#include "model/deepseek_v4/config.h"
#include "model/linear.h"  // QuantSimulation (--quant-simulation)

namespace flint::cli {

// Storage of the KV cache (--kv-cache-dtype).
enum class KvCacheDtype {
  kAuto,     // the model's default: FP8 for DeepSeek-V4
  kFp8E4m3,  // fp8, fp8_e4m3, fp8_ds_mla
  kBf16,     // bf16, bfloat16
};

// Activation type between layers (--dtype).
enum class ModelDtype { kAuto, kBf16, kF32 };

// --scheduling-policy.
enum class SchedulingPolicy { kFcfs, kPriority };

// The speculative methods flint implements (vLLM has more; those are refused).
enum class SpecMethod {
  kNone,    // no speculative decoding
  kAuto,    // a model but no method: dspark if the checkpoint has DSpark stages, else mtp
  kDSpark,  // DeepSeek-V4-Flash-0731's DSpark stages mtp.0..2 (block drafting)
  kMtp,     // the checkpoint's MTP layer mtp.0 (vLLM: mtp, deepseek_mtp)
  kNgram,   // prompt lookup, no draft weights
};

enum class DraftSampling { kGreedy, kProbabilistic };

// --speculative-config, from JSON and/or --speculative-config.KEY VALUE (merged key by key
// in command-line order). Unset optionals mean "from the checkpoint" (draft length) or
// vLLM's default.
struct SpeculativeArgs {
  SpecMethod method = SpecMethod::kNone;
  std::string method_name;  // as given: "dspark", "deepseek_mtp", ...
  std::optional<std::string> model;
  // The draft lives in the served checkpoint (model absent or the same directory):
  // DSpark uses stages mtp.0..2, MTP uses mtp.0. Set by parse_serve_args.
  bool draft_in_target_checkpoint = false;
  std::optional<int64_t> num_speculative_tokens;  // > 0; unset: dspark_block_size / 1
  std::optional<int64_t> draft_tensor_parallel_size;
  std::optional<int64_t> prompt_lookup_max;  // ngram only; defaults filled in (5, 5)
  std::optional<int64_t> prompt_lookup_min;
  std::optional<int64_t> disable_by_batch_size;  // no drafting above this many requests
  std::optional<int64_t> max_model_len;          // no drafting beyond this context
  DraftSampling draft_sample_method = DraftSampling::kGreedy;
  bool enable_adaptive_verification = false;  // dspark only
  // Keys accepted for vLLM compatibility that change nothing in flint, with the reason.
  std::vector<std::pair<std::string, std::string>> ignored_keys;
  // Every key given, merged: echoed in the log and the configuration dump.
  nlohmann::json given = nlohmann::json::object();

  bool enabled() const { return method != SpecMethod::kNone; }
  bool operator==(const SpeculativeArgs&) const = default;
};

// The engine's speculative settings for `s` on a checkpoint with `model`'s config: the
// method left to the checkpoint resolved, defaults filled in. Throws flint::Error when the
// checkpoint cannot serve the method.
engine::SpeculativeConfig engine_speculative(const SpeculativeArgs& s, const dsv4::Config& model);

struct ModelArgs {
  std::string path;  // the MODEL argument (or --model): a local checkpoint directory
  bool trust_remote_code = false;
  ModelDtype dtype = ModelDtype::kAuto;
  std::optional<int64_t> max_model_len;  // unset or "auto": the model's maximum
  std::optional<std::string> tokenizer;  // directory holding tokenizer.json
  std::string tokenizer_mode = "auto";
  std::optional<std::string> revision;
  std::optional<std::string> quantization;
  std::string load_format = "auto";
  std::optional<std::string> download_dir;
  nlohmann::json hf_overrides = nlohmann::json::object();  // merged into config.json
  std::string generation_config = "auto";                  // auto, vllm or a folder
  nlohmann::json override_generation_config = nlohmann::json::object();
  int64_t seed = 0;
  int64_t max_logprobs = 20;  // -1: no limit
};

struct ParallelArgs {
  int64_t tensor_parallel_size = 1;
  int64_t pipeline_parallel_size = 1;
  int64_t data_parallel_size = 1;
  bool enable_expert_parallel = false;
  bool enable_eplb = false;
  std::optional<std::string> distributed_executor_backend;
  bool disable_custom_all_reduce = false;
};

struct CacheArgs {
  double gpu_memory_utilization = 0.9;  // (0, 1]: fraction of RAM for weights + KV cache
  std::optional<int64_t> kv_cache_memory_bytes;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  int64_t block_size = 256;  // tokens per KV block: a positive multiple of kBlockSizeUnit
  bool enable_prefix_caching = true;
  std::optional<int64_t> num_gpu_blocks_override;
  double swap_space_gib = 4;
  double cpu_offload_gib = 0;
  std::optional<double> kv_offloading_size_gib;
  std::string kv_offloading_backend = "native";
  std::optional<std::string> kv_offloading_dir;  // the disk tier's folder

  // DeepSeek-V4's largest compression ratio: a block holds whole compressed entries.
  static constexpr int64_t kBlockSizeUnit = 128;
};

struct SchedulerArgs {
  std::optional<int64_t> max_num_batched_tokens;  // unset: the engine's default
  std::optional<int64_t> max_num_seqs;
  bool enable_chunked_prefill = true;
  int64_t max_num_partial_prefills = 1;
  int64_t max_long_partial_prefills = 1;
  int64_t long_prefill_token_threshold = 0;  // 0: 4% of max-model-len
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  bool async_scheduling = false;
};

struct ServerArgs {
  std::optional<std::string> host;              // unset: 127.0.0.1
  int64_t port = 8000;                          // 0: any free port
  std::vector<std::string> served_model_names;  // empty: the MODEL argument
  std::vector<std::string> api_keys;            // never logged
  std::optional<std::string> chat_template;
  std::string chat_template_content_format = "auto";
  nlohmann::json default_chat_template_kwargs = nlohmann::json::object();
  std::string response_role = "assistant";
  bool enable_auto_tool_choice = false;
  std::optional<std::string> tool_call_parser;  // deepseek_v4
  std::optional<std::string> reasoning_parser;  // deepseek_v4
  bool enable_prompt_tokens_details = false;
  bool return_tokens_as_token_ids = false;
  bool enable_force_include_usage = false;
  std::string uvicorn_log_level = "info";
  bool disable_uvicorn_access_log = false;
  bool enable_log_requests = false;
  std::optional<int64_t> max_log_len;
  bool disable_log_stats = false;
  int64_t max_waiting_requests = 0;  // 0: no bound
  double shutdown_timeout = 30;      // seconds running requests get to finish on SIGTERM
};

// Flags that only configure GPU machinery in vLLM; kept so that command lines parse.
struct GpuOnlyArgs {
  bool enforce_eager = false;
  std::optional<int64_t> optimization_level;  // -O0 .. -O3
  nlohmann::json compilation_config = nlohmann::json::object();
  nlohmann::json kv_transfer_config = nlohmann::json::object();
  std::optional<std::string> attention_backend;
  std::optional<int64_t> max_cudagraph_capture_size;
};

// Settings vLLM does not have.
struct FlintArgs {
  int64_t threads = 0;  // worker threads; 0: one per core
  std::string log_level = "info";
  QuantSimulation quant_simulation = QuantSimulation::kOfficial;
  bool enable_debug_replay = false;  // requests may replace the model's output (tests only)
  double collective_timeout = 300;   // seconds a collective across ranks may wait
  std::string debug_fault;           // RANK:fail|stall|die:STEP|start-up (tests only)
};

// A flag as given on the command line, for the explanation lines.
struct GivenFlag {
  std::string name;   // declared name, e.g. "--tensor-parallel-size" for -tp
  std::string value;  // last value given ("" for a switch turned on, "false" when off)
};

struct ServeArgs {
  bool help = false;  // --help was given: the help is printed, nothing else was parsed
  ModelArgs model;
  ParallelArgs parallel;
  CacheArgs cache;
  SchedulerArgs scheduler;
  SpeculativeArgs speculative;
  ServerArgs server;
  GpuOnlyArgs gpu_only;
  FlintArgs flint;
  std::vector<GivenFlag> given;  // each flag once, in order of first appearance
};

// What the start-up lines need to know about this machine.
struct MachineInfo {
  int64_t ram_bytes = 0;        // MemTotal, capped by a cgroup memory limit if any
  int64_t available_bytes = 0;  // MemAvailable when read
  int64_t cores = 1;            // physical cores this process may run on
};
// Reads /proc/meminfo, the cgroup limit and the CPU affinity mask.
MachineInfo read_machine_info();

// Parses the arguments after "serve". Throws UsageError (naming the flag or key, with a
// suggestion for unknown ones) on any mistake. With -h / --help / --help=WORD the help is
// printed on stdout and the result has help == true. `command` names the command in the
// usage line and error hints (other commands, e.g. inspect, accept the serve command line).
// `command` and `description` head the help text (`flint inspect` parses the same line).
ServeArgs parse_serve_args(std::span<const std::string> args, std::string_view command = "serve",
                           std::string_view description = {});

// One line per flag given (args.given order): what it means and what flint does with it
// (applied now; recorded for a part not wired into `flint serve` yet; or not applicable
// here, and why).
std::vector<std::string> explain_serve_args(const ServeArgs& args, const MachineInfo& machine);

// Worker threads to use (--threads, 0 meaning one per core).
int64_t effective_threads(const ServeArgs& args, const MachineInfo& machine);
// Bytes of RAM for weights plus KV cache: --gpu-memory-utilization x RAM.
int64_t memory_budget_bytes(const ServeArgs& args, const MachineInfo& machine);

std::string serve_help();                     // the text of `flint serve --help`
std::string serve_flags_markdown();           // the flag table of docs/cli.md
std::vector<std::string> serve_flag_names();  // every declared flag (no aliases)

std::string_view to_string(KvCacheDtype dtype);
std::string_view to_string(SpecMethod method);

}  // namespace flint::cli
