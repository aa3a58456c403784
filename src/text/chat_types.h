// Typed form of an OpenAI-style chat request, parsed once at the HTTP edge.
//
// Everything downstream (chat encoding, the completion parsers) works on these structs, never on
// JSON maps. The few JSON values kept (tool schemas, response_format) are nlohmann::ordered_json
// because the prompt renders them with their keys in the order the client sent them: parse the
// request body with ordered_json (or the string overload below), never with nlohmann::json,
// whose std::map would sort the keys and change the prompt.
//
// Errors: every parse function throws flint::Error naming the JSON path of the bad field, e.g.
// "messages[2].tool_calls[0].function.arguments: expected a string, got object".
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flint {

enum class ChatRole { kSystem, kUser, kAssistant, kTool, kDeveloper, kLatestReminder };
std::string_view role_name(ChatRole role);

// One entry of `tools`: {"type": "function", "function": {name, description, parameters, ...}}.
struct ToolDefinition {
  std::string name;
  std::string description;            // "" when absent
  nlohmann::ordered_json parameters;  // the JSON schema; null when absent
  // The whole "function" object as sent (key order kept, extra keys such as "strict" included):
  // the encoder writes exactly this object into the prompt, like DeepSeek's encoder does.
  nlohmann::ordered_json function;
};

// An assistant's earlier tool call, as the client sends it back.
struct ChatToolCall {
  std::string id;  // "" when absent
  std::string name;
  std::string arguments;  // JSON text, normally an object; kept as sent
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  // Text content. A list of content parts is flattened at parse time: text parts joined by
  // "\n\n" (the encoder's rule for multi-part tool results); for tool messages a non-text part
  // becomes "[Unsupported <type>]" like the encoder writes, for other roles it is an error.
  // nullopt means null or absent.
  std::optional<std::string> content;
  std::optional<std::string> reasoning_content;  // also read from "reasoning"
  std::vector<ChatToolCall> tool_calls;
  std::string tool_call_id;  // tool messages: which call this result answers
  std::string name;          // accepted, not rendered (the encoder ignores it)

  // Extensions of DeepSeek's encoder (not OpenAI fields), accepted so that its documented
  // message lists encode as it does:
  std::vector<ToolDefinition> tools;                      // tools declared on this message
  std::optional<nlohmann::ordered_json> response_format;  // rendered after the tools
  std::optional<std::string> task;  // quick-instruction task: action, query, authority, ...
  bool wo_eos = false;              // assistant turn without the closing EOS
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string name;  // kNamed only
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;  // request-level `tools`
  ToolChoice tool_choice;
  // From chat_template_kwargs (thinking / enable_thinking, reasoning_effort, drop_thinking), else
  // from the top-level `reasoning_effort` and DeepSeek-style `thinking: {"type": "enabled"}`.
  std::optional<bool> thinking;
  std::optional<std::string> reasoning_effort;
  std::optional<bool> drop_thinking;
};

// Parses a whole /v1/chat/completions body (fields other than the ones above are ignored).
ChatRequest parse_chat_request(const nlohmann::ordered_json& body);
// Same from the raw body text; throws flint::Error if it is not JSON.
ChatRequest parse_chat_request(std::string_view body_text);

std::vector<ChatMessage> parse_chat_messages(const nlohmann::ordered_json& messages,
                                             std::string_view path = "messages");
std::vector<ToolDefinition> parse_tools(const nlohmann::ordered_json& tools,
                                        std::string_view path = "tools");

// Linear search by name; nullptr when absent.
const ToolDefinition* find_tool(std::span<const ToolDefinition> tools, std::string_view name);

}  // namespace flint
