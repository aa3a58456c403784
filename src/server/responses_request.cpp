#include "server/responses_request.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "server/api_error.h"

namespace flint::server {
namespace {

[[noreturn]] void fail(const std::string& path, std::string_view message) {
  throw ApiError(400, path, fmt::format("{}: {}", path, message));
}

[[noreturn]] void fail_type(const std::string& path, std::string_view expected, const Json& got) {
  fail(path, fmt::format("expected {}, got {}", expected, json_type_name(got)));
}

std::string require_string(const Json& object, std::string_view key, std::string_view path) {
  auto value = get_string(object, key, path);
  if (!value) fail(join_path(path, key), "missing (expected a string)");
  return std::move(*value);
}

void append_paragraph(std::optional<std::string>& text, const std::string& more) {
  if (!text || text->empty()) {
    text = more;
  } else if (!more.empty()) {
    *text += "\n\n";
    *text += more;
  }
}

// Text of a content list: parts joined by a blank line (the chat encoder's rule). In a tool's
// output, a part that is not text becomes "[Unsupported <type>]" as DeepSeek's encoder writes
// it; elsewhere it is refused.
std::string parse_parts(const Json& parts, const std::string& path, bool tool_output) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Json& part = parts[i];
    const std::string part_path = join_path(path, i);
    if (!part.is_object()) fail_type(part_path, "a content part object", part);
    const std::string type = require_string(part, "type", part_path);
    if (i > 0) text += "\n\n";
    if (type == "input_text" || type == "output_text" || type == "text") {
      text += require_string(part, "text", part_path);
    } else if (type == "refusal") {
      text += require_string(part, "refusal", part_path);
    } else if (tool_output) {
      text += fmt::format("[Unsupported {}]", type);
    } else {
      fail(join_path(part_path, "type"),
           fmt::format("'{}' content is not supported (text only: input_text, output_text)", type));
    }
  }
  return text;
}

// `content` (a message's) or `output` (a function_call_output's): a string or a part list.
std::string parse_text_field(const Json& item, std::string_view key, const std::string& path,
                             bool tool_output) {
  const std::string field_path = join_path(path, key);
  const Json* value = field(item, key);
  if (value == nullptr) fail(field_path, "missing (expected a string or an array of parts)");
  if (value->is_string()) return value->get<std::string>();
  if (!value->is_array()) fail_type(field_path, "a string or an array of parts", *value);
  return parse_parts(*value, field_path, tool_output);
}

// A reasoning item's text: its reasoning_text content, else its summary (encrypted_content,
// which only OpenAI can read, is ignored).
std::string parse_reasoning(const Json& item, const std::string& path) {
  std::optional<std::string> text;
  for (std::string_view key : {"content", "summary"}) {
    const Json* parts = get_array(item, key, path);
    if (parts == nullptr) continue;
    for (std::size_t i = 0; i < parts->size(); ++i) {
      const Json& part = (*parts)[i];
      const std::string part_path = join_path(join_path(path, key), i);
      if (!part.is_object()) fail_type(part_path, "a reasoning part object", part);
      append_paragraph(text, require_string(part, "text", part_path));
    }
    if (text && !text->empty()) break;
  }
  return text.value_or("");
}

ChatRole parse_role(const Json& item, const std::string& path) {
  auto role = get_string(item, "role", path);
  if (!role)
    fail(join_path(path, "role"), "missing (expected user, assistant, system or developer)");
  if (*role == "user") return ChatRole::kUser;
  if (*role == "assistant") return ChatRole::kAssistant;
  if (*role == "system" || *role == "developer") return ChatRole::kSystem;
  fail(join_path(path, "role"),
       fmt::format("unknown role '{}' (valid: user, assistant, system, developer)", *role));
}

std::vector<ToolDefinition> parse_function_tools(const Json& tools) {
  // Hosted tools flint cannot run. Codex offers web_search and image_generation by default;
  // they are left out of the prompt rather than failing every request it sends.
  static constexpr std::array<std::string_view, 5> kIgnored{
      "web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26",
      "image_generation"};
  std::vector<ToolDefinition> result;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    const std::string path = join_path("tools", i);
    if (!tool.is_object()) fail_type(path, "a tool object", tool);
    const std::string type = require_string(tool, "type", path);
    if (type != "function") {
      bool ignored = false;
      for (auto name : kIgnored) ignored = ignored || name == type;
      if (ignored) continue;
      fail(join_path(path, "type"),
           fmt::format("'{}' tools are not supported (function tools only)", type));
    }
    ToolDefinition definition;
    definition.name = require_string(tool, "name", path);
    definition.description = get_string(tool, "description", path).value_or("");
    if (const Json* parameters = get_object(tool, "parameters", path)) {
      definition.parameters = *parameters;
    }
    get_bool(tool, "strict", path);  // validated; not enforced (no constrained decoding)
    // The function object the prompt shows, as the chat API's would be: the tool's own keys
    // in the order sent, without "type" (nulls dropped).
    definition.function = Json::object();
    for (const auto& [key, value] : tool.items()) {
      if (value.is_null()) continue;
      if (key == "name" || key == "description" || key == "parameters" || key == "strict") {
        definition.function[key] = value;
      }
    }
    result.push_back(std::move(definition));
  }
  return result;
}

ToolChoice parse_tool_choice(const Json& value, const std::vector<ToolDefinition>& tools) {
  ToolChoice choice;
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text == "auto") {
      choice.mode = ToolChoiceMode::kAuto;
    } else if (text == "none") {
      choice.mode = ToolChoiceMode::kNone;
    } else if (text == "required") {
      choice.mode = ToolChoiceMode::kRequired;
    } else {
      fail("tool_choice", fmt::format("unknown value '{}' (valid: auto, none, required, or "
                                      "{{\"type\": \"function\", \"name\": ...}})",
                                      text));
    }
  } else if (value.is_object()) {
    const std::string type = require_string(value, "type", "tool_choice");
    if (type != "function") {
      fail("tool_choice.type",
           fmt::format("'{}' is not supported (valid: a function, or auto, none, required)", type));
    }
    choice.mode = ToolChoiceMode::kNamed;
    // The chat API's nested form {"function": {"name"}} is accepted too.
    std::optional<std::string> name = get_string(value, "name", "tool_choice");
    if (!name) {
      if (const Json* function = get_object(value, "function", "tool_choice")) {
        name = get_string(*function, "name", "tool_choice.function");
      }
    }
    if (!name) fail("tool_choice.name", "missing (expected a string)");
    if (find_tool(tools, *name) == nullptr) {
      fail("tool_choice.name", fmt::format("no function tool named '{}' in tools", *name));
    }
    choice.name = std::move(*name);
  } else {
    fail_type("tool_choice", "a string or an object", value);
  }
  if (choice.mode != ToolChoiceMode::kAuto && choice.mode != ToolChoiceMode::kNone &&
      tools.empty()) {
    fail("tool_choice", "a tool call is required but tools has no function tool");
  }
  return choice;
}

void parse_reasoning_options(const Json& body, ResponsesRequest& request) {
  const Json* reasoning = get_object(body, "reasoning");
  if (reasoning == nullptr) return;
  static constexpr std::array<std::string_view, 7> kEfforts{"none", "minimal", "low", "medium",
                                                            "high", "xhigh",   "max"};
  auto effort = get_string(*reasoning, "effort", "reasoning");
  if (effort) {
    bool known = false;
    for (auto name : kEfforts) known = known || name == *effort;
    if (!known) {
      fail("reasoning.effort",
           fmt::format("unknown value '{}' (valid: none, minimal, low, medium, high, xhigh)",
                       *effort));
    }
  }
  // summary / generate_summary: DeepSeek-V4 writes no summaries; accepted and echoed.
  auto summary = get_string(*reasoning, "summary", "reasoning");
  request.reasoning_effort = effort;
  request.settings.reasoning = Json{{"effort", effort ? Json(*effort) : Json(nullptr)},
                                    {"summary", summary ? Json(*summary) : Json(nullptr)}};
}

void parse_text_options(const Json& body, ResponsesRequest& request) {
  const Json* text = get_object(body, "text");
  if (text == nullptr) return;
  request.settings.text = *text;  // verbosity is accepted and echoed, not acted on
  const Json* format = get_object(*text, "format", "text");
  if (format == nullptr) {
    request.settings.text["format"] = Json{{"type", "text"}};
    return;
  }
  const std::string type = require_string(*format, "type", "text.format");
  if (type == "text") return;
  if (type == "json_schema") {
    require_string(*format, "name", "text.format");
    if (get_object(*format, "schema", "text.format") == nullptr) {
      fail("text.format.schema", "missing (expected a JSON schema object)");
    }
  } else if (type != "json_object") {
    fail("text.format.type",
         fmt::format("unknown value '{}' (valid: text, json_schema, json_object)", type));
  }
  request.response_format = *format;
}

void refuse_unsupported(const Json& body) {
  if (get_bool(body, "background").value_or(false)) {
    fail("background", "background responses are not supported");
  }
  if (field(body, "conversation") != nullptr) {
    fail("conversation", "conversations are not supported; use previous_response_id");
  }
  if (field(body, "prompt") != nullptr) {
    fail("prompt", "prompt templates are not supported; send instructions and input");
  }
  if (auto truncation = get_string(body, "truncation"); truncation && *truncation != "disabled") {
    fail("truncation",
         fmt::format("'{}' is not supported (valid: disabled): flint does not drop conversation "
                     "items, a conversation longer than the context is refused",
                     *truncation));
  }
  if (auto top = get_int(body, "top_logprobs")) {
    if (*top < 0 || *top > 20)
      fail("top_logprobs", fmt::format("must be in [0, 20], got {}", *top));
    if (*top > 0) {
      fail("top_logprobs", "logprobs are not supported on /v1/responses; use /v1/chat/completions");
    }
  }
  if (const Json* include = get_array(body, "include")) {
    for (std::size_t i = 0; i < include->size(); ++i) {
      const Json& value = (*include)[i];
      const std::string path = join_path("include", i);
      if (!value.is_string()) fail_type(path, "a string", value);
      // Other values (reasoning.encrypted_content, ...) ask for data flint does not have.
      if (value.get_ref<const std::string&>() == "message.output_text.logprobs") {
        fail(path, "logprobs are not supported on /v1/responses; use /v1/chat/completions");
      }
    }
  }
}

}  // namespace

std::vector<ChatMessage> parse_response_items(const Json& items, std::string_view list_path) {
  if (!items.is_array()) fail_type(std::string(list_path), "an array of items", items);
  std::vector<ChatMessage> out;
  bool assistant_open = false;  // out.back() is the assistant turn being assembled
  auto assistant = [&]() -> ChatMessage& {
    if (!assistant_open) {
      out.emplace_back().role = ChatRole::kAssistant;
      assistant_open = true;
    }
    return out.back();
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Json& item = items[i];
    const std::string path = join_path(list_path, i);
    if (!item.is_object()) fail_type(path, "an item object", item);
    const std::optional<std::string> type = get_string(item, "type", path);
    if (!type || *type == "message") {
      const ChatRole role = parse_role(item, path);
      std::string text = parse_text_field(item, "content", path, false);
      if (role == ChatRole::kAssistant) {
        append_paragraph(assistant().content, text);
      } else {
        assistant_open = false;
        ChatMessage& message = out.emplace_back();
        message.role = role;
        message.content = std::move(text);
      }
    } else if (*type == "reasoning") {
      std::string text = parse_reasoning(item, path);
      if (text.empty()) continue;  // e.g. OpenAI's encrypted-only reasoning
      // Reasoning after the turn's answer begins a new step of the model.
      if (assistant_open && (out.back().content || !out.back().tool_calls.empty())) {
        assistant_open = false;
      }
      append_paragraph(assistant().reasoning_content, text);
    } else if (*type == "function_call") {
      ChatToolCall call;
      call.id = require_string(item, "call_id", path);
      call.name = require_string(item, "name", path);
      call.arguments = require_string(item, "arguments", path);
      assistant().tool_calls.push_back(std::move(call));
    } else if (*type == "function_call_output") {
      assistant_open = false;
      ChatMessage& message = out.emplace_back();
      message.role = ChatRole::kTool;
      message.tool_call_id = require_string(item, "call_id", path);
      message.content = parse_text_field(item, "output", path, true);
    } else if (*type == "item_reference") {
      fail(join_path(path, "type"),
           "'item_reference' items are not supported; send the item itself, or use "
           "previous_response_id");
    } else {
      fail(join_path(path, "type"),
           fmt::format("items of type '{}' are not supported (valid: message, reasoning, "
                       "function_call, function_call_output)",
                       *type));
    }
  }
  return out;
}

ResponsesRequest parse_responses_request(const Json& body) {
  if (!body.is_object()) fail_type("request body", "an object", body);
  refuse_unsupported(body);
  ResponsesRequest request;
  ResponseSettings& settings = request.settings;
  request.model = get_string(body, "model");

  if (const Json* input = field(body, "input")) {
    if (input->is_string()) {
      ChatMessage& message = request.input.emplace_back();
      message.role = ChatRole::kUser;
      message.content = input->get<std::string>();
    } else if (input->is_array()) {
      request.input = parse_response_items(*input, "input");
    } else {
      fail_type("input", "a string or an array of items", *input);
    }
  }
  request.instructions = get_string(body, "instructions");
  if (request.instructions) settings.instructions = *request.instructions;
  request.previous_response_id = get_string(body, "previous_response_id");
  if (request.previous_response_id) settings.previous_response_id = *request.previous_response_id;

  if (const Json* tools = get_array(body, "tools")) {
    request.tools = parse_function_tools(*tools);
    settings.tools = *tools;
  }
  if (const Json* choice = field(body, "tool_choice")) {
    request.tool_choice = parse_tool_choice(*choice, request.tools);
    settings.tool_choice = *choice;
  }
  request.parallel_tool_calls = get_bool(body, "parallel_tool_calls").value_or(true);
  settings.parallel_tool_calls = request.parallel_tool_calls;

  parse_reasoning_options(body, request);
  parse_text_options(body, request);

  request.temperature = get_number(body, "temperature");
  if (request.temperature && !(*request.temperature >= 0 && *request.temperature <= 2)) {
    fail("temperature", fmt::format("must be in [0, 2], got {}", *request.temperature));
  }
  request.top_p = get_number(body, "top_p");
  if (request.top_p && !(*request.top_p > 0 && *request.top_p <= 1)) {
    fail("top_p", fmt::format("must be in (0, 1], got {}", *request.top_p));
  }
  request.max_output_tokens = get_int(body, "max_output_tokens");
  if (request.max_output_tokens) {
    if (*request.max_output_tokens < 1) {
      fail("max_output_tokens",
           fmt::format("must be at least 1, got {}", *request.max_output_tokens));
    }
    settings.max_output_tokens = *request.max_output_tokens;
  }

  request.stream = get_bool(body, "stream").value_or(false);
  request.store = get_bool(body, "store").value_or(true);
  settings.store = request.store;
  if (const Json* metadata = get_object(body, "metadata")) {
    for (const auto& [key, value] : metadata->items()) {
      if (!value.is_string()) fail_type(join_path("metadata", key), "a string", value);
    }
    settings.metadata = *metadata;
  }
  if (auto user = get_string(body, "user")) settings.user = *user;
  if (auto top = get_int(body, "top_logprobs")) settings.top_logprobs = *top;
  // Accepted and ignored: service_tier, safety_identifier, prompt_cache_key,
  // prompt_cache_retention, stream_options, max_tool_calls, context_management, include's other
  // values (they concern OpenAI's hosted features).
  return request;
}

ChatRequest build_responses_chat(const ResponsesRequest& request,
                                 const std::vector<ChatMessage>& history) {
  if (request.input.empty()) {
    fail("input", "missing (expected a string or an array with at least one item)");
  }
  ChatRequest chat;
  chat.tools = request.tools;
  chat.tool_choice = request.tool_choice;
  chat.reasoning_effort = request.reasoning_effort;

  std::vector<const ChatMessage*> all;
  all.reserve(history.size() + request.input.size());
  for (const ChatMessage& message : history) all.push_back(&message);
  for (const ChatMessage& message : request.input) all.push_back(&message);

  // One leading system message: the instructions, then the conversation's own leading system
  // messages, so that the encoder's tools (and response format) section follows all of them.
  std::optional<std::string> head = request.instructions;
  std::size_t first = 0;
  for (; first < all.size() && all[first]->role == ChatRole::kSystem; ++first) {
    append_paragraph(head, all[first]->content.value_or(""));
  }
  if (head || request.response_format) {
    ChatMessage& system = chat.messages.emplace_back();
    system.role = ChatRole::kSystem;
    system.content = head.value_or("");
    system.response_format = request.response_format;
  }
  bool has_turn = false;
  for (std::size_t i = first; i < all.size(); ++i) {
    has_turn = has_turn || all[i]->role != ChatRole::kSystem;
    chat.messages.push_back(*all[i]);
  }
  if (!has_turn) fail("input", "expected a message besides system and developer messages");
  return chat;
}

}  // namespace flint::server
