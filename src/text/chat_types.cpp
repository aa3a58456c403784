#include "text/chat_types.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "base/error.h"
#include "text/py_json.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::array<std::string_view, 6> kTasks{"action", "query", "authority",
                                                 "domain", "title", "read_url"};

std::string_view type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "number";
    default:
      return "unknown";
  }
}

[[noreturn]] void fail_type(std::string_view path, std::string_view expected, const Json& got) {
  throw Error("{}: expected {}, got {}", path, expected, type_name(got));
}

std::string member_path(std::string_view path, std::string_view key) {
  return fmt::format("{}.{}", path, key);
}

std::string index_path(std::string_view path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}

// The member `key` of `object`, or nullptr when absent or null.
const Json* member(const Json& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> optional_string(const Json& object, std::string_view key,
                                           std::string_view path) {
  const Json* value = member(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) fail_type(member_path(path, key), "a string", *value);
  return value->get<std::string>();
}

std::string required_string(const Json& object, std::string_view key, std::string_view path) {
  const Json* value = member(object, key);
  if (value == nullptr) throw Error("{}: missing (expected a string)", member_path(path, key));
  if (!value->is_string()) fail_type(member_path(path, key), "a string", *value);
  return value->get<std::string>();
}

std::optional<bool> optional_bool(const Json& object, std::string_view key, std::string_view path) {
  const Json* value = member(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) fail_type(member_path(path, key), "a boolean", *value);
  return value->get<bool>();
}

ChatRole parse_role(const Json& message, std::string_view path) {
  static constexpr std::array<std::pair<std::string_view, ChatRole>, 6> kRoles{{
      {"system", ChatRole::kSystem},
      {"user", ChatRole::kUser},
      {"assistant", ChatRole::kAssistant},
      {"tool", ChatRole::kTool},
      {"developer", ChatRole::kDeveloper},
      {"latest_reminder", ChatRole::kLatestReminder},
  }};
  const std::string role = required_string(message, "role", path);
  for (const auto& [name, value] : kRoles) {
    if (name == role) return value;
  }
  throw Error(
      "{}.role: unknown role '{}' (valid: system, user, assistant, tool, developer, "
      "latest_reminder)",
      path, role);
}

// Content as text: a string, null, or a list of content parts (see ChatMessage::content).
std::optional<std::string> parse_content(const Json& message, ChatRole role,
                                         std::string_view path) {
  const Json* value = member(message, "content");
  const std::string content_path = member_path(path, "content");
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (!value->is_array())
    fail_type(content_path, "a string, an array of content parts or null", *value);
  std::string text;
  for (std::size_t i = 0; i < value->size(); ++i) {
    const Json& part = (*value)[i];
    const std::string part_path = index_path(content_path, i);
    if (!part.is_object()) fail_type(part_path, "a content part object", part);
    const std::string type = required_string(part, "type", part_path);
    if (i > 0) text += "\n\n";
    if (type == "text") {
      text += required_string(part, "text", part_path);
    } else if (type == "refusal" && role == ChatRole::kAssistant) {
      text += required_string(part, "refusal", part_path);
    } else if (role == ChatRole::kTool) {
      text += fmt::format("[Unsupported {}]", type);  // what DeepSeek's encoder writes
    } else {
      throw Error("{}.type: content parts of type '{}' are not supported (text only)", part_path,
                  type);
    }
  }
  return text;
}

std::vector<ChatToolCall> parse_tool_calls(const Json& message, std::string_view path) {
  std::vector<ChatToolCall> calls;
  const Json* value = member(message, "tool_calls");
  if (value == nullptr) return calls;
  const std::string calls_path = member_path(path, "tool_calls");
  if (!value->is_array()) fail_type(calls_path, "an array", *value);
  for (std::size_t i = 0; i < value->size(); ++i) {
    const Json& item = (*value)[i];
    const std::string item_path = index_path(calls_path, i);
    if (!item.is_object()) fail_type(item_path, "an object", item);
    ChatToolCall call;
    call.id = optional_string(item, "id", item_path).value_or("");
    if (auto type = optional_string(item, "type", item_path); type && *type != "function") {
      throw Error("{}.type: only 'function' tool calls are supported, got '{}'", item_path, *type);
    }
    const Json* function = member(item, "function");
    const std::string function_path = member_path(item_path, "function");
    if (function == nullptr) throw Error("{}: missing (expected an object)", function_path);
    if (!function->is_object()) fail_type(function_path, "an object", *function);
    call.name = required_string(*function, "name", function_path);
    call.arguments = required_string(*function, "arguments", function_path);
    if (call.id.empty()) call.id = optional_string(*function, "id", function_path).value_or("");
    calls.push_back(std::move(call));
  }
  return calls;
}

ChatMessage parse_message(const Json& json, std::string_view path) {
  if (!json.is_object()) fail_type(path, "a message object", json);
  ChatMessage message;
  message.role = parse_role(json, path);
  message.content = parse_content(json, message.role, path);
  message.reasoning_content = optional_string(json, "reasoning_content", path);
  if (!message.reasoning_content)
    message.reasoning_content = optional_string(json, "reasoning", path);
  message.tool_calls = parse_tool_calls(json, path);
  message.tool_call_id = optional_string(json, "tool_call_id", path).value_or("");
  message.name = optional_string(json, "name", path).value_or("");
  if (const Json* tools = member(json, "tools")) {
    message.tools = parse_tools(*tools, member_path(path, "tools"));
  }
  if (const Json* format = member(json, "response_format")) message.response_format = *format;
  message.task = optional_string(json, "task", path);
  if (message.task) {
    bool known = false;
    for (auto task : kTasks) known = known || task == *message.task;
    if (!known) {
      throw Error(
          "{}.task: unknown task '{}' (valid: action, query, authority, domain, title, "
          "read_url)",
          path, *message.task);
    }
  }
  message.wo_eos = optional_bool(json, "wo_eos", path).value_or(false);
  if (message.role == ChatRole::kDeveloper && (!message.content || message.content->empty())) {
    throw Error("{}.content: a developer message needs non-empty content", path);
  }
  if (!message.tool_calls.empty() && message.role != ChatRole::kAssistant) {
    throw Error("{}.tool_calls: only assistant messages carry tool calls", path);
  }
  return message;
}

ToolChoice parse_tool_choice(const Json& body) {
  ToolChoice choice;
  const Json* value = member(body, "tool_choice");
  if (value == nullptr) return choice;
  if (value->is_string()) {
    const auto& text = value->get_ref<const std::string&>();
    if (text == "auto") return choice;
    if (text == "none")
      choice.mode = ToolChoiceMode::kNone;
    else if (text == "required")
      choice.mode = ToolChoiceMode::kRequired;
    else
      throw Error("tool_choice: unknown value '{}' (valid: auto, none, required, or an object)",
                  text);
    return choice;
  }
  if (!value->is_object()) fail_type("tool_choice", "a string or an object", *value);
  const Json* function = member(*value, "function");
  if (function == nullptr || !function->is_object()) {
    throw Error("tool_choice.function: missing (expected {{\"name\": ...}})");
  }
  choice.mode = ToolChoiceMode::kNamed;
  choice.name = required_string(*function, "name", "tool_choice.function");
  return choice;
}

}  // namespace

std::string_view role_name(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem:
      return "system";
    case ChatRole::kUser:
      return "user";
    case ChatRole::kAssistant:
      return "assistant";
    case ChatRole::kTool:
      return "tool";
    case ChatRole::kDeveloper:
      return "developer";
    case ChatRole::kLatestReminder:
      return "latest_reminder";
  }
  return "unknown";
}

std::vector<ToolDefinition> parse_tools(const Json& tools, std::string_view path) {
  std::vector<ToolDefinition> result;
  if (tools.is_null()) return result;
  if (!tools.is_array()) fail_type(path, "an array", tools);
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& item = tools[i];
    const std::string item_path = index_path(path, i);
    if (!item.is_object()) fail_type(item_path, "an object", item);
    if (auto type = optional_string(item, "type", item_path); type && *type != "function") {
      throw Error("{}.type: only 'function' tools are supported, got '{}'", item_path, *type);
    }
    const Json* function = member(item, "function");
    const std::string function_path = member_path(item_path, "function");
    if (function == nullptr) throw Error("{}: missing (expected an object)", function_path);
    if (!function->is_object()) fail_type(function_path, "an object", *function);
    ToolDefinition tool;
    tool.name = required_string(*function, "name", function_path);
    tool.description = optional_string(*function, "description", function_path).value_or("");
    if (const Json* parameters = member(*function, "parameters")) {
      if (!parameters->is_object()) {
        fail_type(member_path(function_path, "parameters"), "a JSON schema object", *parameters);
      }
      tool.parameters = *parameters;
    }
    tool.function = *function;
    result.push_back(std::move(tool));
  }
  return result;
}

std::vector<ChatMessage> parse_chat_messages(const Json& messages, std::string_view path) {
  if (!messages.is_array()) fail_type(path, "an array of messages", messages);
  std::vector<ChatMessage> result;
  result.reserve(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    result.push_back(parse_message(messages[i], index_path(path, i)));
  }
  return result;
}

ChatRequest parse_chat_request(const Json& body) {
  if (!body.is_object()) fail_type("request body", "an object", body);
  ChatRequest request;
  const Json* messages = member(body, "messages");
  if (messages == nullptr) throw Error("messages: missing (expected an array of messages)");
  request.messages = parse_chat_messages(*messages, "messages");
  if (request.messages.empty()) throw Error("messages: expected at least one message");
  if (const Json* tools = member(body, "tools")) request.tools = parse_tools(*tools, "tools");
  request.tool_choice = parse_tool_choice(body);
  if (request.tool_choice.mode == ToolChoiceMode::kNamed &&
      find_tool(request.tools, request.tool_choice.name) == nullptr) {
    throw Error("tool_choice.function.name: no tool named '{}' in tools", request.tool_choice.name);
  }

  request.reasoning_effort = optional_string(body, "reasoning_effort", "request");
  if (const Json* thinking = member(body, "thinking")) {
    if (thinking->is_boolean()) {
      request.thinking = thinking->get<bool>();
    } else if (thinking->is_object()) {
      const std::string type = required_string(*thinking, "type", "thinking");
      if (type != "enabled" && type != "disabled") {
        throw Error("thinking.type: expected 'enabled' or 'disabled', got '{}'", type);
      }
      request.thinking = type == "enabled";
    } else {
      fail_type("thinking", "a boolean or {\"type\": \"enabled\"|\"disabled\"}", *thinking);
    }
  }
  if (const Json* kwargs = member(body, "chat_template_kwargs")) {
    constexpr std::string_view kPath = "chat_template_kwargs";
    if (!kwargs->is_object()) fail_type(kPath, "an object", *kwargs);
    auto thinking = optional_bool(*kwargs, "thinking", kPath);
    auto enable_thinking = optional_bool(*kwargs, "enable_thinking", kPath);
    if (thinking || enable_thinking) {
      request.thinking = thinking.value_or(false) || enable_thinking.value_or(false);
    }
    if (auto effort = optional_string(*kwargs, "reasoning_effort", kPath)) {
      request.reasoning_effort = effort;
    }
    request.drop_thinking = optional_bool(*kwargs, "drop_thinking", kPath);
  }
  return request;
}

ChatRequest parse_chat_request(std::string_view body_text) {
  Json body = parse_json_text(body_text);
  if (body.is_discarded()) throw Error("request body: not valid JSON");
  return parse_chat_request(body);
}

const ToolDefinition* find_tool(std::span<const ToolDefinition> tools, std::string_view name) {
  for (const auto& tool : tools) {
    if (tool.name == name) return &tool;
  }
  return nullptr;
}

}  // namespace flint
