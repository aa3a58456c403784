#include "text/chat_types.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;

// The message of the flint::Error thrown when parsing `body`, or "" if none.
std::string error_of(const std::string& body) {
  try {
    parse_chat_request(std::string_view(body));
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ChatTypes, ParsesAFullRequest) {
  ChatRequest request = parse_chat_request(std::string_view(R"({
    "model": "x", "temperature": 0.2,
    "messages": [
      {"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "reasoning_content": "r",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1",
       "content": [{"type": "text", "text": "out"}, {"type": "image_url", "image_url": {}}]},
      {"role": "developer", "content": "d"},
      {"role": "latest_reminder", "content": "today"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "does f",
               "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
               "strict": true}}],
    "tool_choice": {"type": "function", "function": {"name": "f"}},
    "reasoning_effort": "high",
    "chat_template_kwargs": {"thinking": true, "drop_thinking": false}
  })"));
  ASSERT_EQ(request.messages.size(), 6u);
  EXPECT_EQ(request.messages[1].content, "a\n\nb");
  EXPECT_FALSE(request.messages[2].content.has_value());
  EXPECT_EQ(request.messages[2].reasoning_content, "r");
  ASSERT_EQ(request.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(request.messages[2].tool_calls[0].arguments, "{\"x\": 1}");
  EXPECT_EQ(request.messages[3].content, "out\n\n[Unsupported image_url]");
  EXPECT_EQ(request.messages[3].tool_call_id, "c1");
  EXPECT_EQ(request.messages[5].role, ChatRole::kLatestReminder);
  ASSERT_EQ(request.tools.size(), 1u);
  EXPECT_EQ(request.tools[0].description, "does f");
  // Key order is kept for the prompt.
  EXPECT_EQ(request.tools[0].function.begin().key(), "name");
  EXPECT_EQ(std::prev(request.tools[0].function.end()).key(), "strict");
  EXPECT_EQ(request.tool_choice.mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(request.reasoning_effort, "high");
  EXPECT_EQ(request.thinking, true);
  EXPECT_EQ(request.drop_thinking, false);
  EXPECT_NE(find_tool(request.tools, "f"), nullptr);
  EXPECT_EQ(find_tool(request.tools, "g"), nullptr);
}

TEST(ChatTypes, ErrorsNameTheJsonPath) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a"}, {"role": "user"},
      {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}]})"),
            "messages[2].tool_calls[0].function.arguments: expected a string, got object");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "robot", "content": "a"}]})"),
            "messages[0].role: unknown role 'robot' (valid: system, user, assistant, tool, "
            "developer, latest_reminder)");
  EXPECT_EQ(
      error_of(R"({"messages": [{"role": "user", "content": 5}]})"),
      "messages[0].content: expected a string, an array of content parts or null, got number");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user",
      "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})"),
            "messages[0].content[0].type: content parts of type 'image_url' are not supported "
            "(text only)");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a"}],
      "tools": [{"type": "function", "function": {"description": "no name"}}]})"),
            "tools[0].function.name: missing (expected a string)");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}]})"),
            "tools[0].function.parameters: expected a JSON schema object, got array");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "developer", "content": ""}]})"),
            "messages[0].content: a developer message needs non-empty content");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a", "task": "sing"}]})"),
            "messages[0].task: unknown task 'sing' (valid: action, query, authority, domain, "
            "title, read_url)");
  EXPECT_EQ(error_of(R"({"messages": []})"), "messages: expected at least one message");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a"}],
      "chat_template_kwargs": {"thinking": "yes"}})"),
            "chat_template_kwargs.thinking: expected a boolean, got string");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a"}],
      "tool_choice": {"type": "function", "function": {"name": "nope"}}})"),
            "tool_choice.function.name: no tool named 'nope' in tools");
  EXPECT_EQ(error_of("{not json"), "request body: not valid JSON");
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "a",
      "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]})"),
            "messages[0].tool_calls: only assistant messages carry tool calls");
}

TEST(ChatTypes, ThinkingSwitches) {
  auto parse = [](const char* extra) {
    return parse_chat_request(std::string_view(
        std::string(R"({"messages": [{"role": "user", "content": "a"}])") + extra + "}"));
  };
  EXPECT_FALSE(parse("").thinking.has_value());
  EXPECT_EQ(parse(R"(, "thinking": {"type": "disabled"})").thinking, false);
  EXPECT_EQ(parse(R"(, "thinking": {"type": "enabled"})").thinking, true);
  EXPECT_EQ(parse(R"(, "chat_template_kwargs": {"enable_thinking": true})").thinking, true);
  // chat_template_kwargs wins over the top-level fields.
  auto both = parse(R"(, "thinking": {"type": "enabled"}, "reasoning_effort": "low",
      "chat_template_kwargs": {"thinking": false, "reasoning_effort": "max"})");
  EXPECT_EQ(both.thinking, false);
  EXPECT_EQ(both.reasoning_effort, "max");
}

}  // namespace
}  // namespace flint
