#include "api_harness.h"

#include <filesystem>

#include "base/log.h"
#include "model/deepseek_v4/model.h"
#include "text/tokenizer_files.h"
#include "tiny_fixture.h"

namespace flint::server::testing {

const dsv4::Model& tiny_model() {
  static const std::unique_ptr<dsv4::Model> model = [] {
    LoadOptions o;
    o.log = false;
    return dsv4::load_model(flint::testing::tiny_checkpoint(), o);
  }();
  return *model;
}

const text::Tokenizer& v4_tokenizer() {
  static const text::Tokenizer tokenizer = [] {
    const auto dir = flint::testing::temp_dir("server-tokenizer");
    text::write_deepseek_v4_tokenizer_files(
        std::filesystem::path(FLINT_NPM_DIR) / "@lenml" / "tokenizer-deepseek_v3" / "models", dir);
    return text::Tokenizer::load(dir);
  }();
  return tokenizer;
}

engine::EngineConfig test_engine_config() {
  engine::EngineConfig c;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 1024;
  c.kv_cache_pages = 512;
  c.block_size = 128;
  return c;
}

ServerConfig test_server_config() {
  ServerConfig c;
  c.served_model_names = {"tiny"};
  c.model_root = flint::testing::tiny_checkpoint().string();
  c.enable_auto_tool_choice = true;
  c.tool_call_parser = true;
  c.reasoning_parser = true;
  c.enable_debug_replay = true;
  c.max_model_len = 1024;
  c.default_sampling.temperature = 0;  // greedy unless a test says otherwise
  c.version = "test";
  return c;
}

ApiHarness::ApiHarness(ServerConfig config, engine::EngineConfig engine_config,
                       std::vector<std::string> api_keys) {
  engine = std::make_unique<engine::Engine>(tiny_model(), engine_config);
  config.max_model_len = engine->config().max_model_len;
  metrics = std::make_unique<Metrics>(config.served_model_names.front());
  ctx = std::make_unique<ApiContext>(std::move(config), *engine, v4_tokenizer(), *metrics);
  ApiServerOptions o;
  o.http.host = "127.0.0.1";
  o.api_keys = std::move(api_keys);
  o.version = "test";
  api = std::make_unique<ApiServer>(o);
  api->set_ready(*ctx);
}

ApiHarness::~ApiHarness() {
  api->shutdown(std::chrono::milliseconds(0));
  api.reset();
  engine.reset();
}

Response request(std::uint16_t port, std::string_view method, std::string_view target,
                 std::string_view body, std::string_view extra_headers,
                 std::chrono::milliseconds timeout) {
  Client client(port, timeout);
  std::string head = std::string(method) + " " + std::string(target) +
                     " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  head += extra_headers;
  if (!body.empty() || method == "POST") {
    head += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n";
  }
  head += "\r\n";
  client.send(head);
  client.send(body);
  return client.read_response();
}

JsonResponse post_json(std::uint16_t port, std::string_view target, const Json& body,
                       std::string_view extra_headers) {
  Response r = request(port, "POST", target, body.dump(), extra_headers);
  JsonResponse out;
  out.status = r.status;
  out.text = r.body;
  out.body = Json::parse(r.body, nullptr, false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

std::vector<SseEvent> parse_sse(std::string_view body, int* comments) {
  std::vector<SseEvent> events;
  SseEvent current;
  bool any = false;
  if (comments) *comments = 0;
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t end = body.find('\n', pos);
    if (end == std::string_view::npos) end = body.size();
    std::string_view line = body.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) {
      if (any) events.push_back(std::move(current));
      current = {};
      any = false;
    } else if (line.front() == ':') {
      if (comments) ++*comments;
    } else if (line.substr(0, 7) == "event: ") {
      current.name = line.substr(7);
      any = true;
    } else if (line.substr(0, 6) == "data: ") {
      current.data = line.substr(6);
      any = true;
    }
  }
  return events;
}

}  // namespace flint::server::testing
