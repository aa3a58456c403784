// A chat request, whichever API it came through (chat completions, Anthropic messages,
// responses), turned into the prompt and the output handling of a GenerationSpec.
//
// - The prompt is DeepSeek-V4's encoding of the messages (text/chat_encoding.h), tokenized so
//   that special-token strings inside client text ("<｜User｜>" typed by a user, in a tool
//   result or a schema) stay text: only the encoder's own markup becomes control tokens.
// - Thinking and reasoning effort come from the request, else from the server's
//   --default-chat-template-kwargs, else thinking on (vLLM's default for DeepSeek-V4).
// - tool_choice: "auto" needs --enable-auto-tool-choice and --tool-call-parser (400 otherwise,
//   as vLLM); "none" leaves the tools out of the prompt and drops any call the model writes;
//   "required" and a named function force the DSML opening of a call: right after the
//   generation prompt in chat mode, right after "</think>" in thinking mode (the model thinks
//   first; the engine forces the tokens), so that a call is made either way.
// - The output is always read by the reasoning and DSML parsers: markup never reaches content.
#pragma once

#include "server/api_context.h"
#include "server/generation.h"
#include "text/chat_types.h"

namespace flint::server {

// parse_chat_request() (the OpenAI shape) with its errors as 400s naming the field.
ChatRequest parse_openai_chat(const Json& body);

// Fills spec.request.prompt, spec.parse_chat, reasoning_start, tools, parser_prefix,
// deliver_tool_calls and spec.request.sampling.forced from `chat`. Throws ApiError (400 naming
// the field) for what cannot be encoded. `spec.request.sampling` should be set already (the
// forced tokens are added to it).
void prepare_chat(const ApiContext& ctx, const ChatRequest& chat, GenerationSpec& spec);

// The prompt text and ids alone (for /tokenize with messages).
struct ChatPromptText {
  std::string text;
  std::vector<int32_t> ids;
};
ChatPromptText render_chat_prompt(const ApiContext& ctx, const ChatRequest& chat);

}  // namespace flint::server
