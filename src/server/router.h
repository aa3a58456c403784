// Routes an API request to its endpoint and answers errors in the endpoint's dialect (OpenAI's
// error JSON; Anthropic's on /v1/messages). Authentication, /health and the life cycle are
// ApiServer's; the router only needs a loaded model (ApiContext). The fuzz target drives it
// directly, without sockets.
#pragma once

#include <memory>

#include "server/api_context.h"
#include "server/http_server.h"
#include "server/api_error.h"
#include "server/openai_responses.h"

namespace flint::server {

class Router {
 public:
  explicit Router(ApiContext& ctx) : ctx_(ctx) {}

  // Answers `request` through `responder`, at once or later (generations). Never throws:
  // an ApiError is its status and body; any other exception a 500 naming it.
  void handle(const Request& request, const std::shared_ptr<Responder>& responder);

  ApiContext& context() { return ctx_; }

 private:
  void route(const Request& request, std::string_view path,
             const std::shared_ptr<Responder>& responder);

  ApiContext& ctx_;
  ResponsesApi responses_;  // its store of responses lives as long as the server
};

// OpenAI's dialect but Anthropic's on /v1/messages and below.
std::string error_body_for(std::string_view path, const ApiError& error);

}  // namespace flint::server
