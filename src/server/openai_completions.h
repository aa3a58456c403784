// POST /v1/completions: OpenAI's (legacy) text completions: a prompt as text or token ids, or a
// list of them, continued as raw text (no chat template, no parsing), whole or streamed.
#pragma once

#include <memory>

#include "server/api_context.h"
#include "server/http_server.h"

namespace flint::server {

void handle_completions(ApiContext& ctx, const Request& request,
                        std::shared_ptr<Responder> responder);

}  // namespace flint::server
