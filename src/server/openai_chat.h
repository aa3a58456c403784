// POST /v1/chat/completions: OpenAI's chat completions, whole or streamed (server-sent events
// in OpenAI's chunk format), with DeepSeek-V4's reasoning and DSML tool calls parsed into
// reasoning_content and tool_calls.
#pragma once

#include <memory>

#include "server/api_context.h"
#include "server/http_server.h"

namespace flint::server {

void handle_chat_completions(ApiContext& ctx, const Request& request,
                             std::shared_ptr<Responder> responder);

}  // namespace flint::server
