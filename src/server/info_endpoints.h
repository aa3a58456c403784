// The small endpoints: /v1/models, /version, /metrics, /tokenize and /detokenize (vLLM's
// request and response shapes).
#pragma once

#include <memory>
#include <string_view>

#include "server/api_context.h"
#include "server/http_server.h"

namespace flint::server {

void handle_models(ApiContext& ctx, std::shared_ptr<Responder> responder);
// GET /v1/models/{id}: 404 for a name this server does not serve.
void handle_model(ApiContext& ctx, std::string_view id, std::shared_ptr<Responder> responder);
void handle_metrics(ApiContext& ctx, std::shared_ptr<Responder> responder);
// {"prompt": text, "add_special_tokens": true} or {"messages": [...]} (the chat prompt) ->
// {"count", "max_model_len", "tokens", "token_strs"}.
void handle_tokenize(ApiContext& ctx, const Request& request, std::shared_ptr<Responder> responder);
// {"tokens": [...]} -> {"prompt": text}.
void handle_detokenize(ApiContext& ctx, const Request& request,
                       std::shared_ptr<Responder> responder);

}  // namespace flint::server
