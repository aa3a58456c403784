#include "server/router.h"

#include "base/log.h"
#include "server/anthropic_messages.h"
#include "server/api_error.h"
#include "server/info_endpoints.h"
#include "server/openai_chat.h"
#include "server/openai_completions.h"

namespace flint::server {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

std::string error_body_for(std::string_view path, const ApiError& error) {
  return starts_with(path, "/v1/messages") ? anthropic_error_body(error) : openai_error_body(error);
}

void Router::handle(const Request& request, const std::shared_ptr<Responder>& responder) {
  const std::string_view path = std::string_view(request.target).substr(0, request.target.find('?'));
  auto fail = [&](const ApiError& e) {
    responder->respond(e.status(), "application/json", error_body_for(path, e));
  };
  try {
    route(request, path, responder);
  } catch (const ApiError& e) {
    fail(e);
  } catch (const Error& e) {
    fail(bad_request(e));
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", request.method, path, e.what());
    fail(ApiError(500, "", "internal error: {}", e.what()));
  }
}

void Router::route(const Request& request, std::string_view path,
                   const std::shared_ptr<Responder>& responder) {
  const std::string& method = request.method;
  auto expect = [&](std::string_view allowed) {
    if (method != allowed) {
      throw ApiError(405, "", "{} is not allowed on {} (use {})", method, path, allowed);
    }
  };
  if (path == "/v1/chat/completions") {
    expect("POST");
    return handle_chat_completions(ctx_, request, responder);
  }
  if (path == "/v1/completions") {
    expect("POST");
    return handle_completions(ctx_, request, responder);
  }
  if (path == "/v1/messages") {
    expect("POST");
    return handle_messages(ctx_, request, responder);
  }
  if (path == "/v1/messages/count_tokens") {
    expect("POST");
    return handle_count_tokens(ctx_, request, responder);
  }
  if (path == "/v1/responses") {
    expect("POST");
    return responses_.handle_create(ctx_, request, responder);
  }
  if (starts_with(path, "/v1/responses/")) {
    const std::string_view id = path.substr(14);
    if (method == "DELETE") return responses_.handle_delete(ctx_, id, responder);
    expect("GET");
    return responses_.handle_get(ctx_, id, responder);
  }
  if (path == "/v1/models") {
    expect("GET");
    return handle_models(ctx_, responder);
  }
  if (starts_with(path, "/v1/models/")) {
    expect("GET");
    return handle_model(ctx_, path.substr(11), responder);
  }
  if (path == "/tokenize") {
    expect("POST");
    return handle_tokenize(ctx_, request, responder);
  }
  if (path == "/detokenize") {
    expect("POST");
    return handle_detokenize(ctx_, request, responder);
  }
  if (path == "/metrics") {
    expect("GET");
    return handle_metrics(ctx_, responder);
  }
  throw ApiError(404, "", "no route for {} {}", method, path);
}

}  // namespace flint::server
