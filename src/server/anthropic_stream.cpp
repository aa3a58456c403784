// Generation output -> Anthropic Message objects and SSE events (see anthropic_messages.h).
#include <algorithm>
#include <utility>

#include "base/log.h"
#include "server/anthropic_messages.h"

namespace flint::server {

namespace {

constexpr std::string_view kCallPrefix = "call_";
constexpr std::string_view kToolUsePrefix = "toolu_";

Json text_block(std::string text) { return Json{{"type", "text"}, {"text", std::move(text)}}; }

// Anthropic's thinking blocks carry a signature that lets its API verify reasoning sent back;
// flint has nothing to verify and takes reasoning back as sent, so the signature is empty.
Json thinking_block(std::string thinking) {
  return Json{{"type", "thinking"}, {"thinking", std::move(thinking)}, {"signature", ""}};
}

Json tool_use_block(std::string_view call_id, const std::string& name, Json input) {
  return Json{{"type", "tool_use"},
              {"id", anthropic_tool_use_id(call_id)},
              {"name", name},
              {"input", std::move(input)}};
}

// The arguments the parser produced are a JSON object (its contract); anything else would be a
// bug upstream, answered with an empty input rather than a failed response.
Json input_object(const ParsedToolCall& call) {
  Json input = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (input.is_object()) return input;
  spdlog::warn("tool call {} ({}): arguments are not a JSON object: {}", call.id, call.name,
               call.arguments);
  return Json::object();
}

}  // namespace

std::string anthropic_tool_use_id(std::string_view call_id) {
  if (call_id.substr(0, kToolUsePrefix.size()) == kToolUsePrefix) return std::string(call_id);
  if (call_id.substr(0, kCallPrefix.size()) == kCallPrefix)
    call_id.remove_prefix(kCallPrefix.size());
  return std::string(kToolUsePrefix) + std::string(call_id);
}

AnthropicStop anthropic_stop(const SampleFinish& finish) {
  if (finish.reason == "tool_calls") return {"tool_use", nullptr};
  if (finish.reason == "length") return {"max_tokens", nullptr};
  if (finish.reason == "stop" && finish.stop_string) return {"stop_sequence", *finish.stop_string};
  return {"end_turn", nullptr};  // EOS, a stop token, an abort the server asked for
}

Json anthropic_usage_json(const engine::Usage& usage) {
  const int64_t cached = std::clamp<int64_t>(usage.cached_prompt_tokens, 0, usage.prompt_tokens);
  return Json{{"input_tokens", usage.prompt_tokens - cached},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", cached},
              {"output_tokens", usage.completion_tokens}};
}

Json anthropic_message_json(std::string_view id, std::string_view model, const SampleOutput& out,
                            const engine::Usage& usage) {
  Json content = Json::array();
  const ParsedCompletion& parsed = out.parsed;
  if (!parsed.reasoning_content.empty())
    content.push_back(thinking_block(parsed.reasoning_content));
  if (!parsed.content.empty()) content.push_back(text_block(parsed.content));
  for (const ParsedToolCall& call : parsed.tool_calls) {
    content.push_back(tool_use_block(call.id, call.name, input_object(call)));
  }
  const AnthropicStop stop = anthropic_stop(out.finish);
  return Json{{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", std::move(content)},
              {"stop_reason", stop.reason},
              {"stop_sequence", stop.sequence},
              {"usage", anthropic_usage_json(usage)}};
}

std::string anthropic_sse_event(std::string_view name, const Json& data) {
  std::string text = "event: ";
  text += name;
  text += "\ndata: ";
  text += dump_json(data);
  text += "\n\n";
  return text;
}

std::string anthropic_error_event(const ApiError& error) {
  std::string text = "event: error\ndata: ";
  text += anthropic_error_body(error);
  text += "\n\n";
  return text;
}

AnthropicStreamFormatter::AnthropicStreamFormatter(std::string message_id, std::string model)
    : id_(std::move(message_id)), model_(std::move(model)) {}

std::string AnthropicStreamFormatter::start(int64_t input_tokens) {
  Json message = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model_},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage",
                   {{"input_tokens", input_tokens},
                    {"cache_creation_input_tokens", 0},
                    {"cache_read_input_tokens", 0},
                    {"output_tokens", 0}}}};
  std::string out =
      anthropic_sse_event("message_start", Json{{"type", "message_start"}, {"message", message}});
  out += anthropic_sse_event("ping", Json{{"type", "ping"}});
  return out;
}

void AnthropicStreamFormatter::open(Block kind, Json content_block, std::string& out) {
  close(out);
  open_ = kind;
  out +=
      anthropic_sse_event("content_block_start", Json{{"type", "content_block_start"},
                                                      {"index", next_index_},
                                                      {"content_block", std::move(content_block)}});
  ++next_index_;
}

void AnthropicStreamFormatter::close(std::string& out) {
  if (open_ == Block::kNone) return;
  // Anthropic sends a thinking block's signature last, just before it stops.
  if (open_ == Block::kThinking)
    block_delta(Json{{"type", "signature_delta"}, {"signature", ""}}, out);
  out += anthropic_sse_event("content_block_stop",
                             Json{{"type", "content_block_stop"}, {"index", next_index_ - 1}});
  open_ = Block::kNone;
  open_call_ = -1;
}

void AnthropicStreamFormatter::block_delta(Json delta, std::string& out) {
  out += anthropic_sse_event("content_block_delta", Json{{"type", "content_block_delta"},
                                                         {"index", next_index_ - 1},
                                                         {"delta", std::move(delta)}});
}

std::string AnthropicStreamFormatter::delta(const CompletionDelta& d) {
  std::string out;
  if (!d.reasoning.empty()) {
    if (open_ != Block::kThinking) open(Block::kThinking, thinking_block(""), out);
    block_delta(Json{{"type", "thinking_delta"}, {"thinking", d.reasoning}}, out);
  }
  auto arguments = [&](const ToolCallDelta& call) {
    if (!call.arguments.empty()) {
      block_delta(Json{{"type", "input_json_delta"}, {"partial_json", call.arguments}}, out);
    }
  };
  // A delta keeps content and calls apart, not their order. The open call's fragments come
  // first (content cannot appear inside a call: it is text after its block), then the content,
  // then new calls (text before a DSML block precedes it).
  std::size_t next = 0;
  const auto& calls = d.tool_calls;
  while (next < calls.size() && calls[next].id.empty() && open_ == Block::kToolUse &&
         calls[next].index == open_call_) {
    arguments(calls[next++]);
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) open(Block::kText, text_block(""), out);
    block_delta(Json{{"type", "text_delta"}, {"text", d.content}}, out);
  }
  for (; next < calls.size(); ++next) {
    const ToolCallDelta& call = calls[next];
    if (!call.id.empty()) {
      open(Block::kToolUse, tool_use_block(call.id, call.name, Json::object()), out);
      open_call_ = call.index;
      arguments(call);
    } else if (open_ == Block::kToolUse && call.index == open_call_) {
      arguments(call);
    } else if (!call.arguments.empty()) {
      ++dropped_fragments_;
      spdlog::warn("anthropic stream: arguments for closed tool call {} dropped: {}", call.index,
                   call.arguments);
    }
  }
  return out;
}

std::string AnthropicStreamFormatter::finish(const SampleFinish& finish,
                                             const engine::Usage& usage) {
  std::string out;
  close(out);
  const AnthropicStop stop = anthropic_stop(finish);
  out += anthropic_sse_event(
      "message_delta",
      Json{{"type", "message_delta"},
           {"delta", {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence}}},
           {"usage", anthropic_usage_json(usage)}});
  out += anthropic_sse_event("message_stop", Json{{"type", "message_stop"}});
  return out;
}

}  // namespace flint::server
