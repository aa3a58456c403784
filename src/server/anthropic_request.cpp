// Anthropic Messages request bodies -> ChatRequest and SamplingParams (see anthropic_messages.h
// for the mapping). Every error is a 400 naming the JSON path of the field at fault:
// "messages[1].content[0].type: ...".
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "server/anthropic_messages.h"

namespace flint::server {

namespace {

[[noreturn]] void fail(const std::string& path, std::string_view message) {
  throw invalid_field(path, message);
}

std::string required_string(const Json& object, std::string_view key, std::string_view path) {
  auto value = get_string(object, key, path);
  if (!value) fail(join_path(path, key), "missing (expected a string)");
  return std::move(*value);
}

const Json& required_object(const Json& value, const std::string& path) {
  if (!value.is_object()) {
    throw ApiError(400, path, "{}: expected an object, got {}", path, json_type_name(value));
  }
  return value;
}

// The block's "type" (the block must be an object with a string type).
std::string block_type(const Json& block, const std::string& path) {
  required_object(block, path);
  return required_string(block, "type", path);
}

void join_into(std::string& to, std::string_view text, std::string_view separator) {
  if (text.empty()) return;
  if (!to.empty()) to += separator;
  to += text;
}

// Blocks the model cannot read: images and files (the model is text-only) and the server
// tools' blocks (flint runs no server tools).
[[noreturn]] void unsupported_block(const std::string& type_path, const std::string& type) {
  if (type == "image" || type == "document" || type == "search_result") {
    throw ApiError(400, type_path, "{}: '{}' blocks are not supported: the model reads text only",
                   type_path, type);
  }
  throw ApiError(400, type_path, "{}: unsupported content block type '{}'", type_path, type);
}

// "system": a string or a list of text blocks.
std::string parse_system(const Json& body) {
  const Json* system = field(body, "system");
  if (system == nullptr) return "";
  if (system->is_string()) return system->get<std::string>();
  if (!system->is_array()) {
    throw ApiError(400, "system", "system: expected a string or a list of text blocks, got {}",
                   json_type_name(*system));
  }
  std::string text;
  for (std::size_t i = 0; i < system->size(); ++i) {
    const std::string path = join_path("system", i);
    const std::string type = block_type((*system)[i], path);
    if (type != "text") {
      throw ApiError(400, join_path(path, "type"),
                     "{}.type: the system prompt takes text blocks only, got '{}'", path, type);
    }
    join_into(text, required_string((*system)[i], "text", path), "\n\n");
  }
  return text;
}

// A tool_result's content: a string, or a list of blocks whose text is joined by "\n\n" (the
// encoder's rule for multi-part results). Other blocks become "[Unsupported <type>]" as the
// reference encoder writes them: a tool that returned an image must not make the whole
// conversation unusable.
std::string tool_result_text(const Json& block, const std::string& path) {
  const Json* content = field(block, "content");
  if (content == nullptr) return "";
  if (content->is_string()) return content->get<std::string>();
  const std::string content_path = join_path(path, "content");
  if (!content->is_array()) {
    throw ApiError(400, content_path, "{}: expected a string or a list of blocks, got {}",
                   content_path, json_type_name(*content));
  }
  std::string text;
  for (std::size_t i = 0; i < content->size(); ++i) {
    const std::string part_path = join_path(content_path, i);
    const std::string type = block_type((*content)[i], part_path);
    if (type == "text") {
      join_into(text, required_string((*content)[i], "text", part_path), "\n\n");
    } else {
      join_into(text, "[Unsupported " + type + "]", "\n\n");
    }
  }
  return text;
}

ChatMessage parse_tool_result(const Json& block, const std::string& path) {
  ChatMessage message;
  message.role = ChatRole::kTool;
  message.tool_call_id = required_string(block, "tool_use_id", path);
  std::string text = tool_result_text(block, path);
  // The prompt has no error flag for a result: say it in the text.
  if (get_bool(block, "is_error", path).value_or(false)) text = "Error: " + text;
  message.content = std::move(text);
  return message;
}

// A user message: its tool results become tool messages (in order), its text a user message
// after them (the results answer the previous assistant turn and must follow it directly).
void append_user(const Json& content, const std::string& path, std::vector<ChatMessage>& out) {
  ChatMessage user;
  user.role = ChatRole::kUser;
  if (content.is_string()) {
    user.content = content.get<std::string>();
    out.push_back(std::move(user));
    return;
  }
  std::string text;
  bool any_text = false;
  bool any_result = false;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string block_path = join_path(path, j);
    const Json& block = content[j];
    const std::string type = block_type(block, block_path);
    const std::string type_path = join_path(block_path, "type");
    if (type == "text") {
      join_into(text, required_string(block, "text", block_path), "\n\n");
      any_text = true;
    } else if (type == "tool_result") {
      out.push_back(parse_tool_result(block, block_path));
      any_result = true;
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      throw ApiError(400, type_path, "{}: '{}' blocks belong in assistant messages", type_path,
                     type);
    } else {
      unsupported_block(type_path, type);
    }
  }
  if (any_text || !any_result) {
    user.content = std::move(text);
    out.push_back(std::move(user));
  }
}

ChatMessage parse_assistant(const Json& content, const std::string& path) {
  ChatMessage message;
  message.role = ChatRole::kAssistant;
  if (content.is_string()) {
    message.content = content.get<std::string>();
    return message;
  }
  std::string text;
  std::string reasoning;
  bool any_reasoning = false;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string block_path = join_path(path, j);
    const Json& block = content[j];
    const std::string type = block_type(block, block_path);
    const std::string type_path = join_path(block_path, "type");
    if (type == "text") {
      // Pieces of one generated text (a text block after a tool call is the model's text after
      // its DSML block): joined as they were generated.
      text += required_string(block, "text", block_path);
    } else if (type == "thinking") {
      reasoning += required_string(block, "thinking", block_path);
      any_reasoning = true;
    } else if (type == "redacted_thinking") {
      // Anthropic's encrypted reasoning of another model: nothing this model can read.
    } else if (type == "tool_use") {
      ChatToolCall call;
      call.id = required_string(block, "id", block_path);
      call.name = required_string(block, "name", block_path);
      const Json* input = field(block, "input");
      if (input == nullptr) {
        call.arguments = "{}";
      } else if (!input->is_object()) {
        const std::string input_path = join_path(block_path, "input");
        throw ApiError(400, input_path, "{}: expected an object, got {}", input_path,
                       json_type_name(*input));
      } else {
        call.arguments = dump_json(*input);
      }
      message.tool_calls.push_back(std::move(call));
    } else if (type == "tool_result") {
      throw ApiError(400, type_path, "{}: 'tool_result' blocks belong in user messages", type_path);
    } else {
      unsupported_block(type_path, type);
    }
  }
  message.content = std::move(text);
  if (any_reasoning) message.reasoning_content = std::move(reasoning);
  return message;
}

std::vector<ChatMessage> parse_messages(const Json& body) {
  const Json* messages = get_array(body, "messages");
  if (messages == nullptr) fail("messages", "missing (expected a list of messages)");
  if (messages->empty()) fail("messages", "at least one message is required");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const std::string path = join_path("messages", i);
    const Json& message = required_object((*messages)[i], path);
    const std::string role = required_string(message, "role", path);
    const std::string content_path = join_path(path, "content");
    const Json* content = field(message, "content");
    if (content == nullptr) fail(content_path, "missing (expected a string or a list of blocks)");
    if (!content->is_string() && !content->is_array()) {
      throw ApiError(400, content_path, "{}: expected a string or a list of blocks, got {}",
                     content_path, json_type_name(*content));
    }
    if (role == "user") {
      append_user(*content, content_path, out);
    } else if (role == "assistant") {
      out.push_back(parse_assistant(*content, content_path));
      // A final assistant message is a prefill: the answer continues it.
      if (i + 1 == messages->size()) out.back().wo_eos = true;
    } else {
      const std::string role_path = join_path(path, "role");
      throw ApiError(400, role_path,
                     "{}: expected 'user' or 'assistant', got '{}' (the system prompt is the "
                     "top-level `system` field)",
                     role_path, role);
    }
  }
  return out;
}

std::vector<ToolDefinition> parse_tools(const Json& body) {
  std::vector<ToolDefinition> tools;
  const Json* list = get_array(body, "tools");
  if (list == nullptr) return tools;
  std::set<std::string, std::less<>> names;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const std::string path = join_path("tools", i);
    const Json& item = required_object((*list)[i], path);
    if (auto type = get_string(item, "type", path); type && *type != "custom") {
      const std::string type_path = join_path(path, "type");
      throw ApiError(400, type_path,
                     "{}: server tools ('{}') are not supported; declare custom tools with "
                     "name, description and input_schema",
                     type_path, *type);
    }
    ToolDefinition tool;
    tool.name = required_string(item, "name", path);
    if (tool.name.empty()) fail(join_path(path, "name"), "must not be empty");
    if (!names.insert(tool.name).second) {
      throw ApiError(400, join_path(path, "name"), "{}.name: duplicate tool name '{}'", path,
                     tool.name);
    }
    auto description = get_string(item, "description", path);
    const Json* schema = get_object(item, "input_schema", path);
    if (schema == nullptr)
      fail(join_path(path, "input_schema"), "missing (expected a JSON schema object)");
    tool.description = description.value_or("");
    tool.parameters = *schema;
    // The prompt lists tools as OpenAI function objects (what DeepSeek's encoder was given).
    tool.function = Json::object();
    tool.function["name"] = tool.name;
    if (description) tool.function["description"] = *description;
    tool.function["parameters"] = *schema;
    tools.push_back(std::move(tool));
  }
  return tools;
}

ToolChoice parse_tool_choice(const Json& body) {
  ToolChoice choice;
  const Json* object = get_object(body, "tool_choice");
  if (object == nullptr) return choice;
  const std::string type = required_string(*object, "type", "tool_choice");
  get_bool(*object, "disable_parallel_tool_use", "tool_choice");  // type-checked, ignored
  if (type == "auto") {
    choice.mode = ToolChoiceMode::kAuto;
  } else if (type == "any") {
    choice.mode = ToolChoiceMode::kRequired;
  } else if (type == "none") {
    choice.mode = ToolChoiceMode::kNone;
  } else if (type == "tool") {
    choice.mode = ToolChoiceMode::kNamed;
    choice.name = required_string(*object, "name", "tool_choice");
  } else {
    throw ApiError(400, "tool_choice.type",
                   "tool_choice.type: unknown value '{}' (valid: auto, any, tool, none)", type);
  }
  return choice;
}

std::optional<bool> parse_thinking(const Json& body) {
  const Json* thinking = get_object(body, "thinking");
  if (thinking == nullptr) return std::nullopt;
  const std::string type = required_string(*thinking, "type", "thinking");
  get_int(*thinking, "budget_tokens", "thinking");  // type-checked, ignored (as DeepSeek's API)
  // "adaptive" lets the model decide how much to think: DeepSeek-V4 thinks in thinking mode.
  if (type == "enabled" || type == "adaptive") return true;
  if (type == "disabled") return false;
  throw ApiError(400, "thinking.type",
                 "thinking.type: unknown value '{}' (valid: enabled, adaptive, disabled)", type);
}

std::optional<std::string> parse_effort(const Json& body) {
  const Json* config = get_object(body, "output_config");
  if (config == nullptr) return std::nullopt;
  auto effort = get_string(*config, "effort", "output_config");
  if (!effort) return std::nullopt;
  for (const char* valid : {"low", "medium", "high", "xhigh", "max"}) {
    if (*effort == valid) return effort;
  }
  throw ApiError(400, "output_config.effort",
                 "output_config.effort: unknown value '{}' (valid: low, medium, high, xhigh, max)",
                 *effort);
}

}  // namespace

ChatRequest parse_anthropic_chat(const Json& body) {
  ChatRequest chat;
  const std::string system = parse_system(body);
  if (!system.empty()) {
    ChatMessage message;
    message.role = ChatRole::kSystem;
    message.content = system;
    chat.messages.push_back(std::move(message));
  }
  for (ChatMessage& message : parse_messages(body)) chat.messages.push_back(std::move(message));
  chat.tools = parse_tools(body);
  chat.tool_choice = parse_tool_choice(body);
  chat.thinking = parse_thinking(body);
  chat.reasoning_effort = parse_effort(body);
  return chat;
}

AnthropicRequest parse_anthropic_request(const Json& body, const SamplingParams& defaults) {
  AnthropicRequest r;
  r.chat = parse_anthropic_chat(body);
  SamplingParams& p = r.sampling;
  p = defaults;
  p.n = 1;
  p.logprobs.reset();
  const std::optional<int64_t> max_tokens = get_int(body, "max_tokens");
  if (!max_tokens) fail("max_tokens", "missing (required: the most tokens to generate)");
  if (*max_tokens < 1) {
    throw ApiError(400, "max_tokens", "max_tokens: must be at least 1, got {}", *max_tokens);
  }
  p.max_tokens = *max_tokens;
  if (auto v = get_number(body, "temperature")) p.temperature = *v;
  if (auto v = get_number(body, "top_p")) p.top_p = *v;
  if (auto v = get_int(body, "top_k")) p.top_k = *v;
  if (const Json* stops = get_array(body, "stop_sequences")) {
    p.stop.clear();
    for (std::size_t i = 0; i < stops->size(); ++i) {
      if (!(*stops)[i].is_string()) {
        const std::string path = join_path("stop_sequences", i);
        throw ApiError(400, path, "{}: expected a string, got {}", path,
                       json_type_name((*stops)[i]));
      }
      p.stop.push_back((*stops)[i].get<std::string>());
    }
  }
  r.stream = get_bool(body, "stream").value_or(false);
  return r;
}

}  // namespace flint::server
