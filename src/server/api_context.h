// What every endpoint needs: the server's settings, the engine, the tokenizer, the metrics and
// the registry of requests in flight. One ApiContext per server, created once the model is
// loaded; endpoints get it by reference and may use it from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "server/json_fields.h"
#include "server/live_requests.h"
#include "server/metrics.h"
#include "text/tokenizer.h"

namespace flint::server {

// The settings of the API (from `flint serve` flags; cmd_serve.cpp fills it).
struct ServerConfig {
  std::vector<std::string> served_model_names;  // the first is the one reported; never empty
  std::string model_root;                       // the checkpoint directory (/v1/models "root")
  std::vector<std::string> api_keys;            // empty: no authentication
  bool enable_auto_tool_choice = false;         // --enable-auto-tool-choice
  bool tool_call_parser = false;                // --tool-call-parser deepseek_v4
  bool reasoning_parser = false;                // --reasoning-parser deepseek_v4
  // --default-chat-template-kwargs: defaults for the requests' chat_template_kwargs.
  nlohmann::ordered_json default_chat_template_kwargs = nlohmann::ordered_json::object();
  // Sampling defaults for fields a request leaves out (generation_config.json, then
  // --override-generation-config), as vLLM applies them.
  SamplingParams default_sampling;
  int64_t max_model_len = 0;
  // A streaming response silent for this long gets an SSE comment (": keep-alive"), so that
  // clients and proxies with idle timeouts keep it during a long prefill.
  std::chrono::milliseconds keep_alive_interval{std::chrono::seconds(10)};
  // Requests may carry "flint_debug_replay": token ids that replace the model's output.
  // Only with the debug flag (--enable-debug-replay); never in production.
  bool enable_debug_replay = false;
  bool enable_log_requests = false;
  std::string version;
};

class ApiContext {
 public:
  ApiContext(ServerConfig config, engine::Engine& engine, const text::Tokenizer& tokenizer,
             Metrics& metrics);

  const ServerConfig& config() const { return config_; }
  engine::Engine& engine() const { return engine_; }
  const text::Tokenizer& tokenizer() const { return tokenizer_; }
  Metrics& metrics() const { return metrics_; }
  LiveRequests& live() { return live_; }

  // The reported model name (the first --served-model-name).
  const std::string& model_name() const { return config_.served_model_names.front(); }
  // Checks the request's "model" field (absent or null is fine, like vLLM): ApiError 404 when
  // it names a model this server does not serve.
  void check_model(const Json& body) const;

  // prefix + 24 random letters and digits ("chatcmpl-..."): response ids, engine request ids.
  // Thread-safe.
  std::string make_id(std::string_view prefix);
  // Seconds since the Unix epoch, for "created" fields.
  static int64_t unix_time();

  // Set when shutdown begins: new generations are refused with 503, running ones finish.
  void set_draining() { draining_ = true; }
  bool draining() const { return draining_; }

 private:
  ServerConfig config_;
  engine::Engine& engine_;
  const text::Tokenizer& tokenizer_;
  Metrics& metrics_;
  LiveRequests live_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> id_counter_{0};
  uint64_t id_seed_ = 0;
};

}  // namespace flint::server
