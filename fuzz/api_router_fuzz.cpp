// libFuzzer target for the API's request handlers: the first byte picks an endpoint, the rest
// is the request body, and the router answers it as it would over HTTP, with the tiny model's
// engine and tokenizer behind it (draining, see World). Whatever a client sends, the server may
// answer any status but must not crash, leak, or leave a request running: after each input
// any generation it started is aborted and must end within 10 s (a stall is a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <unistd.h>
#include <string>

#include "base/log.h"
#include "engine/engine.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v4/tiny_checkpoint.h"
#include "server/api_context.h"
#include "server/metrics.h"
#include "server/router.h"
#include "text/tokenizer.h"
#include "text/tokenizer_files.h"

namespace {

using namespace flint;

// Records nothing: the answers' bytes are not checked, only that giving them is safe.
class NullResponder : public server::Responder {
 public:
  bool respond(int, std::string_view, std::string, const server::Headers&) override { return true; }
  bool start_stream(int, std::string_view, const server::Headers&) override { return true; }
  bool write(std::string) override { return true; }
  bool finish() override { return true; }
  void on_disconnect(std::function<void()>) override {}
  bool connected() const override { return true; }
};

struct World {
  World() {
    spdlog::set_level(spdlog::level::off);
    dir = std::filesystem::temp_directory_path() / ("flint-api-fuzz-" + std::to_string(::getpid()));
    dsv4::TinyCheckpointOptions options;
    options.seed = 1;
    dsv4::write_tiny_checkpoint(dir, dsv4::tiny_preset("tiny"), options);
    text::write_deepseek_v4_tokenizer_files(
        std::filesystem::path(FLINT_NPM_DIR) / "@lenml" / "tokenizer-deepseek_v3" / "models", dir);
    LoadOptions load;
    load.log = false;
    model = dsv4::load_model(dir, load);
    tokenizer = std::make_unique<text::Tokenizer>(text::Tokenizer::load(dir));
    engine::EngineConfig ec;
    ec.max_model_len = 256;
    ec.max_num_batched_tokens = 256;
    ec.block_size = 128;
    ec.kv_cache_pages = 256;
    engine = std::make_unique<engine::Engine>(*model, ec);
    server::ServerConfig config;
    config.served_model_names = {"tiny"};
    config.enable_auto_tool_choice = true;
    config.tool_call_parser = true;
    config.reasoning_parser = true;
    config.enable_debug_replay = true;
    config.max_model_len = 256;
    metrics = std::make_unique<server::Metrics>("tiny");
    ctx = std::make_unique<server::ApiContext>(config, *engine, *tokenizer, *metrics);
    router = std::make_unique<server::Router>(*ctx);
    // Everything up to the engine runs for each input — parsing, the chat encoding, the
    // tokenizer, the engine's validation — and then the draining server answers 503 instead
    // of generating: a forward pass of the instrumented model takes seconds, which would
    // leave the fuzzer a handful of inputs per minute. (The generation pipeline and the
    // sinks see model output, not client input; the server tests and the load test run them.)
    ctx->set_draining();
  }
  ~World() {
    engine.reset();  // its thread's callbacks use the context
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path dir;
  std::unique_ptr<dsv4::Model> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<server::Metrics> metrics;
  std::unique_ptr<server::ApiContext> ctx;
  std::unique_ptr<server::Router> router;
};

constexpr struct {
  const char* method;
  const char* path;
} kRoutes[] = {
    {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"POST", "/v1/messages"},
    {"POST", "/v1/messages/count_tokens"}, {"POST", "/v1/responses"}, {"POST", "/tokenize"},
    {"POST", "/detokenize"}, {"GET", "/v1/models"}, {"GET", "/v1/responses/x"},
};

}  // namespace

World& world_instance() {
  static World world;
  return world;
}

// Writing and loading the tiny checkpoint takes seconds under ASan: done before the first
// input, outside libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  world_instance();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = world_instance();
  if (size < 1) return 0;
  const auto& route = kRoutes[data[0] % (sizeof kRoutes / sizeof kRoutes[0])];
  server::Request request;
  request.method = route.method;
  request.target = route.path;
  request.body.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  world.router->handle(request, std::make_shared<NullResponder>());
  for (const auto& id : world.ctx->live().ids()) world.engine->abort(id);
  if (!world.ctx->live().wait_empty(std::chrono::seconds(10))) {
    std::abort();  // a request that neither finishes nor aborts: the server would hang
  }
  return 0;
}
