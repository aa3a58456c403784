// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, which coding agents
// (Claude Code among them) and the official Anthropic SDKs speak.
//
// The request is translated into a ChatRequest (anthropic_request.cpp) and runs through the
// common pipeline (generation.h) like a chat completion; the output is formatted as a Message
// object or as Anthropic's named SSE events (anthropic_stream.cpp). The mapping:
//   system (string or text blocks)       -> a leading system message
//   user text blocks                     -> a user message (blocks joined by "\n\n")
//   user tool_result blocks              -> tool messages, in order, before the user's text
//   assistant text / thinking / tool_use -> content / reasoning_content / tool_calls
//                                           (input -> arguments JSON text); redacted_thinking
//                                           is dropped; a final assistant message is a prefill
//                                           (continued, not closed)
//   tools [{name, description, input_schema}] -> function tools (schema key order kept)
//   tool_choice auto / any / tool / none -> auto / required / named / none
//   thinking enabled|adaptive / disabled -> thinking / chat mode; absent: the server default
//   output_config.effort                 -> reasoning_effort
// Tool-call ids: the parser makes OpenAI-style "call_X"; clients get "toolu_X". The ids a client
// sends back (tool_use.id, tool_result.tool_use_id) are used as sent; they only pair results
// with calls and never reach the prompt text.
//
// Refused with 400 naming the field: image, document and other non-text blocks in user or
// assistant content (the model reads text only; inside a tool_result they become
// "[Unsupported <type>]" like DeepSeek's encoder writes, so that an agent's history stays
// usable), server tools (a tool `type` other than "custom"), a missing max_tokens.
// Ignored: metadata, cache_control, citations, signatures, budget_tokens,
// disable_parallel_tool_use, service_tier, container, mcp_servers and unknown fields.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/request.h"
#include "engine/sampler.h"
#include "server/api_context.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/json_fields.h"
#include "text/chat_types.h"
#include "text/completion_parser.h"

namespace flint::server {

// ---------------------------------------------------------------------------------------------
// Requests (anthropic_request.cpp): pure functions, ApiError 400 naming the JSON path.

struct AnthropicRequest {
  ChatRequest chat;
  SamplingParams sampling;  // the defaults overridden by the request (n is always 1)
  bool stream = false;
};

// A /v1/messages body. `defaults`: the server's sampling defaults.
AnthropicRequest parse_anthropic_request(const Json& body, const SamplingParams& defaults);
// The chat part alone (system, messages, tools, tool_choice, thinking, output_config): what
// count_tokens needs, where max_tokens is not required.
ChatRequest parse_anthropic_chat(const Json& body);

// ---------------------------------------------------------------------------------------------
// Responses (anthropic_stream.cpp): pure formatting, no engine.

// "call_X" -> "toolu_X"; an id already starting with "toolu_" is kept; anything else gets the
// prefix in front.
std::string anthropic_tool_use_id(std::string_view call_id);

// stop_reason and stop_sequence of a finished sample: end_turn (EOS, a stop token, an abort),
// stop_sequence (with the matched string), max_tokens, tool_use.
struct AnthropicStop {
  std::string reason;
  Json sequence;  // the stop string, or null
};
AnthropicStop anthropic_stop(const SampleFinish& finish);

// {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"}.
// Anthropic counts cache reads apart: input_tokens = prompt tokens - cached prompt tokens.
Json anthropic_usage_json(const engine::Usage& usage);

// The whole Message: {"id", "type": "message", "role": "assistant", "model", "content": [a
// thinking block if there was reasoning, a text block if there was content, then one tool_use
// block per call], "stop_reason", "stop_sequence", "usage"}.
Json anthropic_message_json(std::string_view id, std::string_view model, const SampleOutput& out,
                            const engine::Usage& usage);

// One SSE event: "event: <name>\ndata: <json>\n\n".
std::string anthropic_sse_event(std::string_view name, const Json& data);
// The `error` event for a failure after the stream started.
std::string anthropic_error_event(const ApiError& error);

// A streamed message as Anthropic's SSE events, fed with the parsed deltas of one sample:
//   message_start, ping,
//   per content block: content_block_start, content_block_delta..., content_block_stop
//     (thinking: thinking_delta..., signature_delta; text: text_delta...; tool_use:
//     input_json_delta... whose partial_json fragments concatenate to the input's JSON),
//   message_delta {stop_reason, stop_sequence, usage}, message_stop.
// Blocks get increasing indices and never overlap: a delta of another kind closes the open
// block and opens a new one (reasoning, then text, then each call, in the usual case; content
// after a tool call opens a second text block). Each method returns the SSE text to send ("" when
// there is nothing). Not thread-safe: one sink feeds it in order.
class AnthropicStreamFormatter {
 public:
  AnthropicStreamFormatter(std::string message_id, std::string model);

  // message_start (usage with `input_tokens`, the prompt's length: cache hits are known only
  // at the end, and message_delta then carries the final counts) and a ping.
  std::string start(int64_t input_tokens);
  std::string delta(const CompletionDelta& delta);
  // Closes the open block; message_delta (with the whole usage) and message_stop.
  std::string finish(const SampleFinish& finish, const engine::Usage& usage);

  // Argument fragments that arrived for a call whose block was already closed (cannot happen
  // with the DSML parser's output; counted so that tests can check it).
  int dropped_fragments() const { return dropped_fragments_; }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };

  void open(Block kind, Json content_block, std::string& out);
  void close(std::string& out);
  void block_delta(Json delta, std::string& out);

  std::string id_;
  std::string model_;
  int next_index_ = 0;  // the index the next block gets
  Block open_ = Block::kNone;
  int open_call_ = -1;  // the parser's index of the call in the open tool_use block
  int dropped_fragments_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Endpoints (anthropic_messages.cpp).

// POST /v1/messages. Throws ApiError before anything is sent (the router answers it in
// Anthropic's error shape); afterwards answers through `responder`, an error after the stream
// started being an `error` event.
void handle_messages(ApiContext& ctx, const Request& request, std::shared_ptr<Responder> responder);

// POST /v1/messages/count_tokens: {"input_tokens": N}, the length of the prompt the request
// would render to (without the tokens a forced tool_choice appends).
void handle_count_tokens(ApiContext& ctx, const Request& request,
                         std::shared_ptr<Responder> responder);

}  // namespace flint::server
