// run_serve: what `flint serve` does once its command line is parsed and checked — listen at
// once, load the model, tokenizer and engine, serve the API, log statistics while it runs,
// and shut down cleanly on SIGINT or SIGTERM (stop taking requests, let the running ones finish
// within --shutdown-timeout, exit 0).
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/ranks.h"
#include "cli/serve_args.h"
#include "engine/engine.h"
#include "formats/checkpoint.h"
#include "model/deepseek_v4/model.h"
#include "server/api_server.h"
#include "server/metrics.h"
#include "text/tokenizer.h"

namespace flint::cli {

namespace {

using Json = nlohmann::json;

// Sampling defaults as vLLM takes them: the checkpoint's generation_config.json (auto), or a
// folder's, or none (vllm); then --override-generation-config over them.
SamplingParams default_sampling(const ServeArgs& args) {
  namespace fs = std::filesystem;
  Json config = Json::object();
  const std::string& source = args.model.generation_config;
  if (source != "vllm") {
    const fs::path file = fs::path(source == "auto" ? args.model.path : source) /
                          "generation_config.json";
    std::ifstream in(file);
    if (in) {
      config = Json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!config.is_object()) throw Error("'{}' is not a JSON object", file.string());
    } else if (source != "auto") {
      throw Error("--generation-config: '{}' not found", file.string());
    }
  }
  config.merge_patch(args.model.override_generation_config);
  SamplingParams p;
  auto number = [&](const char* key, auto& target) {
    if (config.contains(key) && config[key].is_number()) {
      target = config[key].get<std::decay_t<decltype(target)>>();
    }
  };
  number("temperature", p.temperature);
  number("top_p", p.top_p);
  number("top_k", p.top_k);
  number("min_p", p.min_p);
  number("repetition_penalty", p.repetition_penalty);
  if (config.contains("max_new_tokens") && config["max_new_tokens"].is_number_integer()) {
    p.max_tokens = config["max_new_tokens"].get<int64_t>();
  }
  Json shown = Json::object();
  for (const char* key :
       {"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_new_tokens"}) {
    if (config.contains(key)) shown[key] = config[key];
  }
  if (!shown.empty()) spdlog::info("default sampling parameters: {}", shown.dump());
  return p;
}

engine::EngineConfig engine_config(const ServeArgs& args, const dsv4::Config& model) {
  EngineFlags f;
  if (args.scheduler.max_num_seqs) f.max_num_seqs = *args.scheduler.max_num_seqs;
  f.max_num_batched_tokens = args.scheduler.max_num_batched_tokens;
  f.enable_chunked_prefill = args.scheduler.enable_chunked_prefill;
  f.max_model_len = args.model.max_model_len.value_or(0);
  f.block_size = args.cache.block_size;
  f.kv_cache_dtype = std::string(to_string(args.cache.kv_cache_dtype));
  f.kv_cache_memory_bytes = args.cache.kv_cache_memory_bytes;
  f.gpu_memory_utilization = args.cache.gpu_memory_utilization;
  f.enable_prefix_caching = args.cache.enable_prefix_caching;
  f.kv_offloading_size = args.cache.kv_offloading_size_gib;
  f.kv_offloading_dir = args.cache.kv_offloading_dir.value_or("");
  f.max_logprobs = args.model.max_logprobs;
  f.seed = args.model.seed;
  engine::EngineConfig c =
      f.config(model, static_cast<int64_t>(Checkpoint::open(args.model.path).total_bytes()));
  if (args.cache.num_gpu_blocks_override) c.kv_cache_pages = *args.cache.num_gpu_blocks_override;
  c.max_waiting_requests = args.server.max_waiting_requests;
  c.quant_simulation = args.flint.quant_simulation;
  c.speculative = engine_speculative(args.speculative, model);
  return c;
}

// SIGINT and SIGTERM go to one thread (blocked everywhere else before any thread starts).
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::thread([this] { watch(); }).detach();
  }

  void set_ready() { ready_ = true; }
  // Waits up to `timeout` for a signal; true once one has come.
  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return signalled_.wait_for(lock, timeout, [this] { return received_ != 0; });
  }
  int received() const { return received_; }

 private:
  void watch() {
    for (int count = 0;; ++count) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) return;
      if (!ready_ || count > 0) {
        // Nothing runs yet (or a second signal): nothing to finish, leave now.
        spdlog::warn("signal {} ({}) {}; exiting now", sig, strsignal(sig),
                     ready_ ? "again during shutdown" : "while loading");
        std::_Exit(ready_ ? 1 : 0);
      }
      spdlog::info("signal {} ({}): shutting down (send it again to exit at once)", sig,
                   strsignal(sig));
      {
        std::lock_guard lock(mutex_);
        received_ = sig;
      }
      signalled_.notify_all();
    }
  }

  sigset_t set_;
  std::atomic<bool> ready_{false};
  std::mutex mutex_;
  std::condition_variable signalled_;
  std::atomic<int> received_{0};
};

// One line every 10 s while there is work, like vLLM's engine log: a stuck server shows it.
void log_stats(const engine::EngineStats& now, const engine::EngineStats& before, double seconds) {
  const auto per_s = [seconds](int64_t n) { return static_cast<double>(n) / seconds; };
  spdlog::info(
      "engine: {} running, {} waiting; {:.1f} tokens/s computed, {:.1f} generated; KV cache "
      "{:.1f}% used; prefix cache hit rate {:.1f}%; {} preemptions",
      now.running, now.waiting, per_s(now.step_tokens - before.step_tokens),
      per_s(now.generated_tokens - before.generated_tokens),
      now.kv_pages_total > 0 ? 100.0 * static_cast<double>(now.kv_pages_used) /
                                   static_cast<double>(now.kv_pages_total)
                             : 0.0,
      now.prefix_queries > 0 ? 100.0 * static_cast<double>(now.prefix_hits) /
                                   static_cast<double>(now.prefix_queries)
                             : 0.0,
      now.preemptions);
  if (now.spec_drafts > before.spec_drafts || now.spec_proposed_tokens > before.spec_proposed_tokens)
    spdlog::info("{}", engine::describe_speculation(now));
}

}  // namespace

int run_serve(const ServeArgs& args) {
  const engine::DebugFault fault = engine::DebugFault::parse_optional(args.flint.debug_fault);
  // Starts no thread in one process (under MPI, MPI's own).
  Ranks ranks = Ranks::start(args.parallel.tensor_parallel_size, args.flint.collective_timeout);
  if (!ranks.leader()) {
    // Rank 0 serves HTTP, schedules and samples; this rank runs its part of each step.
    set_thread_count(threads_for_this_rank(args.flint.threads));
    auto model = ranks.load_model(args.model.path, args.parallel.enable_expert_parallel, fault);
    engine::EngineConfig ec = engine_config(args, model->config());
    ec.debug_fault = fault;
    engine::follow_rank0(*model, ec, *ranks.comm(), fault);
    return kExitOk;
  }
  SignalWatcher signals;  // before any thread of ours: each inherits the blocked mask
  set_thread_count(threads_for_this_rank(args.flint.threads));

  server::ApiServerOptions options;
  options.http.host = args.server.host.value_or("127.0.0.1");
  options.http.port = static_cast<uint16_t>(args.server.port);
  options.api_keys = args.server.api_keys;
  options.version = FLINT_VERSION;
  server::ApiServer api(options);  // logs where it listens; /health is 503 until ready

  auto model = ranks.load_model(args.model.path, args.parallel.enable_expert_parallel, fault);
  const text::Tokenizer tokenizer = text::Tokenizer::load(args.model.tokenizer.value_or(args.model.path));
  // A pointer so that the engine (whose thread runs the requests' callbacks, which use the
  // context) is stopped before the context and the metrics go away.
  engine::EngineConfig ec = engine_config(args, model->config());
  ec.debug_fault = fault;
  auto engine = std::make_unique<engine::Engine>(*model, ec);

  server::ServerConfig config;
  config.served_model_names = args.server.served_model_names;
  if (config.served_model_names.empty()) config.served_model_names.push_back(args.model.path);
  config.model_root = args.model.path;
  config.api_keys = args.server.api_keys;
  config.enable_auto_tool_choice = args.server.enable_auto_tool_choice;
  config.tool_call_parser = args.server.tool_call_parser.has_value();
  config.reasoning_parser = args.server.reasoning_parser.has_value();
  config.default_chat_template_kwargs =
      nlohmann::ordered_json::parse(args.server.default_chat_template_kwargs.dump());
  config.default_sampling = default_sampling(args);
  config.max_model_len = engine->config().max_model_len;
  config.enable_debug_replay = args.flint.enable_debug_replay;
  config.enable_log_requests = args.server.enable_log_requests;
  config.version = FLINT_VERSION;
  server::Metrics metrics(config.served_model_names.front());
  server::ApiContext context(std::move(config), *engine, tokenizer, metrics);
  api.set_ready(context);
  signals.set_ready();
  spdlog::info("ready: serving {} as '{}' on http://{}:{}", args.model.path, context.model_name(),
               options.http.host, api.port());

  constexpr auto kStatsInterval = std::chrono::seconds(10);
  engine::EngineStats last = engine->stats();
  auto last_time = std::chrono::steady_clock::now();
  while (!signals.wait(kStatsInterval)) {
    const engine::EngineStats now = engine->stats();
    const auto t = std::chrono::steady_clock::now();
    if (!args.server.disable_log_stats && (now.steps != last.steps || now.running + now.waiting > 0))
      log_stats(now, last, std::chrono::duration<double>(t - last_time).count());
    last = now;
    last_time = t;
  }
  api.shutdown(std::chrono::milliseconds(static_cast<int64_t>(args.server.shutdown_timeout * 1000)));
  engine.reset();
  spdlog::info("shut down");
  return kExitOk;
}

}  // namespace flint::cli
