// An API server on the tiny checkpoint for the endpoint tests: the real ApiServer on a free
// port of 127.0.0.1 with an engine and the DeepSeek-V4 tokenizer, plus helpers that send JSON
// and read whole or streamed (SSE) answers with the blocking test client.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "http_test_client.h"
#include "server/api_context.h"
#include "server/api_server.h"
#include "server/metrics.h"
#include "text/tokenizer.h"

namespace flint::server::testing {

using Json = nlohmann::ordered_json;

// How long a test waits for an answer: the sanitizer builds run the model 10 to 40 times
// slower (a replayed tool call of 60 tokens takes a minute under ThreadSanitizer).
inline constexpr std::chrono::milliseconds kReadTimeout{std::chrono::seconds(
#ifdef FLINT_SANITIZED
    600
#else
    60
#endif
    )};

// The tiny model and the V4 tokenizer, loaded once per test process.
const dsv4::Model& tiny_model();
const text::Tokenizer& v4_tokenizer();

// Engine settings small enough for the tests' pace (and for the sanitizer builds).
engine::EngineConfig test_engine_config();
ServerConfig test_server_config();

struct ApiHarness {
  explicit ApiHarness(ServerConfig config = test_server_config(),
                      engine::EngineConfig engine_config = test_engine_config(),
                      std::vector<std::string> api_keys = {});
  ~ApiHarness();

  std::uint16_t port() const { return api->port(); }

  // Destroyed bottom up: the server, then the engine (its thread may still be finishing
  // requests, whose callbacks use the context), then the context.
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<ApiContext> ctx;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<ApiServer> api;
};

// One request on a fresh connection. `extra_headers` are whole lines ("X: y\r\n").
Response request(std::uint16_t port, std::string_view method, std::string_view target,
                 std::string_view body = {}, std::string_view extra_headers = {},
                 std::chrono::milliseconds timeout = kReadTimeout);
// POST with a JSON body; the answer parsed as JSON (null if the body is not JSON).
struct JsonResponse {
  int status = 0;
  Json body;
  std::string text;
};
JsonResponse post_json(std::uint16_t port, std::string_view target, const Json& body,
                       std::string_view extra_headers = {});

// A server-sent event: its name ("" without an event: line) and data.
struct SseEvent {
  std::string name;
  std::string data;
};
// Splits an SSE body into events; comment lines (": keep-alive") are counted in `comments`.
std::vector<SseEvent> parse_sse(std::string_view body, int* comments = nullptr);

}  // namespace flint::server::testing
