// The API server of `flint serve`: routes HTTP requests to the endpoints, checks the API key,
// answers errors in the endpoint's dialect, sends keep-alive comments on silent streams, and
// runs the life cycle: loading (every endpoint but /health and /version answers 503) → ready →
// draining (new generations 503, running ones finish) → stopped.
//
// Routes: GET / (the chat page), /health, /version, /metrics, /v1/models[/{id}];
// POST /v1/chat/completions, /v1/completions, /v1/messages, /v1/messages/count_tokens,
// /v1/responses, /tokenize, /detokenize; GET and DELETE /v1/responses/{id}.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/api_context.h"
#include "server/http_server.h"

namespace flint::server {

struct ApiServerOptions {
  HttpServerOptions http;
  std::vector<std::string> api_keys;  // empty: no authentication
  std::string version;
};

class ApiServer {
 public:
  // Starts listening at once (the port is taken before the model loads, and /health answers
  // 503 meanwhile). Throws flint::Error naming host:port if it cannot bind.
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();  // shutdown(0)
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  std::uint16_t port() const;
  // The model is loaded: serve the API with `ctx` (which must outlive the server or the next
  // shutdown()).
  void set_ready(ApiContext& ctx);
  // Refuses new generations, waits up to `grace` for the running ones, aborts what is left
  // (waiting briefly for their final events), then closes every connection. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  // Connections open now (for tests).
  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Compares an offered key with each configured key in time independent of where they differ.
bool api_key_matches(std::string_view offered, const std::vector<std::string>& keys);

}  // namespace flint::server
