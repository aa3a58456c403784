// POST /v1/responses bodies -> typed requests and chat messages (pure functions, no engine).
//
// The Responses API describes a conversation as a list of items; DeepSeek-V4's encoder wants
// chat messages. The mapping (docs/server.md, "/v1/responses"):
//   instructions                       -> a leading system message (this request's only: the
//                                         API does not carry instructions over from
//                                         previous_response_id)
//   message, role system / developer   -> system (OpenAI's developer role is its system role;
//                                         DeepSeek's "developer" is a per-turn user-side role
//                                         that the encoder drops from earlier turns). Leading
//                                         ones merge with the instructions into one message,
//                                         so that the tools section follows all of them.
//   message, role user                 -> user
//   message, role assistant            -> assistant content
//   reasoning                          -> the assistant's reasoning_content
//   function_call                      -> an assistant tool call
//   function_call_output               -> a tool message (tool_call_id = call_id)
// Consecutive reasoning / assistant message / function_call items form one assistant turn
// (what one response outputs), so the prompt re-renders the model's turn as it generated it.
// Content parts: input_text / output_text / text / refusal; images, files and audio are
// refused (400 naming the part). text.format json_schema / json_object is rendered into the
// prompt as DeepSeek's "## Response Format" section: a strong hint, not enforced (flint has
// no constrained decoding).
//
// Every error is an ApiError (400) naming the JSON path: "input[2].content[0].type: ...".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/json_fields.h"
#include "server/responses_output.h"
#include "text/chat_types.h"

namespace flint::server {

struct ResponsesRequest {
  std::optional<std::string> model;  // as sent (echoed)
  std::optional<std::string> instructions;
  std::vector<ChatMessage> input;  // this request's input items (the instructions excluded)
  std::optional<std::string> previous_response_id;
  std::vector<ToolDefinition> tools;  // function tools
  ToolChoice tool_choice;
  std::optional<std::string> reasoning_effort;  // none, minimal, low, medium, high, xhigh, max
  std::optional<Json> response_format;          // text.format when not plain text
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> max_output_tokens;
  bool stream = false;
  bool store = true;
  bool parallel_tool_calls = true;
  // The settings the response object echoes (temperature and top_p are filled in later with
  // the effective values; id, created_at and model by the endpoint).
  ResponseSettings settings;
};

// Parses and validates a whole body. Throws ApiError (400) naming the field.
ResponsesRequest parse_responses_request(const Json& body);

// A list of items (the `input` array, or a stored response's `output`) as chat messages.
// `path` names the list in errors ("input").
std::vector<ChatMessage> parse_response_items(const Json& items, std::string_view path);

// The chat request to encode: the instructions (and leading system messages) first, then
// `history` (the conversation of previous_response_id, oldest first), then the input items.
// Throws ApiError when nothing is left to answer.
ChatRequest build_responses_chat(const ResponsesRequest& request,
                                 const std::vector<ChatMessage>& history);

}  // namespace flint::server
