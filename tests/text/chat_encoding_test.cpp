#include "text/chat_encoding.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "chat_test_util.h"
#include "text/chat_markers.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;
using testing::read_chat_data;
using testing::read_chat_json;

ChatEncodeOptions thinking() { return ChatEncodeOptions{}; }

ChatEncodeOptions chat() {
  ChatEncodeOptions options;
  options.thinking_mode = ThinkingMode::kChat;
  return options;
}

std::vector<ChatMessage> messages_of(const char* json) {
  return parse_chat_messages(Json::parse(json));
}

// The four golden pairs shipped with DeepSeek's encoder (test_encoding_dsv4.py).
TEST(ChatEncoding, DeepSeekGoldenCase1ThinkingWithTools) {
  Json input = read_chat_json("test_input_1.json");
  input["messages"][0]["tools"] = input["tools"];  // as test_case_1 does
  auto messages = parse_chat_messages(input["messages"]);
  EXPECT_EQ(encode_messages(messages, thinking()), read_chat_data("test_output_1.txt"));
}

TEST(ChatEncoding, DeepSeekGoldenCase1ThroughRequestLevelTools) {
  // The same conversation as an OpenAI request: tools at the top level attach to the system
  // message, giving the same prompt.
  ChatRequest request = parse_chat_request(read_chat_json("test_input_1.json"));
  EXPECT_EQ(encode_chat(request, resolve_encode_options(request)),
            read_chat_data("test_output_1.txt"));
}

TEST(ChatEncoding, DeepSeekGoldenCase2ThinkingDropsEarlierReasoning) {
  auto messages = parse_chat_messages(read_chat_json("test_input_2.json"));
  const std::string prompt = encode_messages(messages, thinking());
  EXPECT_EQ(prompt, read_chat_data("test_output_2.txt"));
  EXPECT_EQ(prompt.find("The user said hello"), std::string::npos);
}

TEST(ChatEncoding, DeepSeekGoldenCase3DeveloperToolsAndReminder) {
  auto messages = parse_chat_messages(read_chat_json("test_input_3.json"));
  EXPECT_EQ(encode_messages(messages, thinking()), read_chat_data("test_output_3.txt"));
}

TEST(ChatEncoding, DeepSeekGoldenCase4ActionTaskInChatMode) {
  auto messages = parse_chat_messages(read_chat_json("test_input_4.json"));
  EXPECT_EQ(encode_messages(messages, chat()), read_chat_data("test_output_4.txt"));
}

// The encoder options a recorded golden case was made with.
ChatEncodeOptions golden_options(const Json& opts) {
  ChatEncodeOptions options;
  if (opts.value("thinking_mode", "thinking") == "chat") options.thinking_mode = ThinkingMode::kChat;
  options.drop_thinking = opts.value("drop_thinking", true);
  options.add_bos = opts.value("add_default_bos_token", true);
  options.context_messages = opts.value("context", 0);
  const std::string effort = opts.value("reasoning_effort", "");
  if (effort == "max") options.reasoning_effort = ReasoningEffort::kMax;
  if (effort == "high") options.reasoning_effort = ReasoningEffort::kHigh;
  return options;
}

// More goldens recorded from the reference encoder by data/chat/generate_goldens.py.
TEST(ChatEncoding, GeneratedGoldens) {
  Json cases = read_chat_json("encoder_goldens.json");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& item : cases) {
    SCOPED_TRACE(item["name"].get<std::string>());
    const ChatEncodeOptions options = golden_options(item["options"]);
    auto messages = parse_chat_messages(item["messages"]);
    EXPECT_EQ(encode_messages(messages, options), item["expected"].get<std::string>());
  }
}

TEST(ChatEncoding, ReadmeQuickStart) {
  auto messages = messages_of(R"([{"role": "system", "content": "You are a helpful assistant."},
                                  {"role": "user", "content": "What is 2+2?"}])");
  EXPECT_EQ(encode_messages(messages, thinking()),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is 2+2?"
            "<｜Assistant｜><think>");
  EXPECT_EQ(encode_messages(messages, chat()),
            "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>What is 2+2?"
            "<｜Assistant｜></think>");
}

TEST(ChatEncoding, ReadmeToolResultFormat) {
  auto messages = messages_of(R"([{"role": "user", "content": "q"},
      {"role": "assistant", "tool_calls": [{"id": "x", "type": "function",
        "function": {"name": "f", "arguments": "{\"param\": \"string_value\", \"count\": 5}"}}]},
      {"role": "tool", "tool_call_id": "x", "content": "{\"ok\": true}"}])");
  EXPECT_EQ(encode_messages(messages, thinking()),
            "<｜begin▁of▁sentence｜><｜User｜>q<｜Assistant｜></think>\n\n"
            "<｜DSML｜tool_calls>\n"
            "<｜DSML｜invoke name=\"f\">\n"
            "<｜DSML｜parameter name=\"param\" string=\"true\">string_value</｜DSML｜parameter>\n"
            "<｜DSML｜parameter name=\"count\" string=\"false\">5</｜DSML｜parameter>\n"
            "</｜DSML｜invoke>\n"
            "</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
            "<｜User｜><tool_result>{\"ok\": true}</tool_result><｜Assistant｜><think>");
}

TEST(ChatEncoding, ReasoningEffortFromRequest) {
  auto request_with = [](const char* extra) {
    return parse_chat_request(Json::parse(
        std::string(R"({"messages": [{"role": "user", "content": "x"}])") + extra + "}"));
  };
  const std::string max_prefix =
      "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n";
  {
    auto request = request_with(R"(, "reasoning_effort": "max")");
    auto options = resolve_encode_options(request);
    EXPECT_EQ(options.reasoning_effort, ReasoningEffort::kMax);
    const std::string prompt = encode_chat(request, options);
    EXPECT_EQ(prompt.substr(0, dsv4::kBos.size() + max_prefix.size()),
              std::string(dsv4::kBos) + max_prefix);
    EXPECT_TRUE(prompt.ends_with("<｜Assistant｜><think>"));
  }
  {
    auto request = request_with(R"(, "chat_template_kwargs": {"reasoning_effort": "xhigh"})");
    EXPECT_EQ(resolve_encode_options(request).reasoning_effort, ReasoningEffort::kMax);
  }
  {
    auto request = request_with(R"(, "reasoning_effort": "low")");
    auto options = resolve_encode_options(request);
    EXPECT_EQ(options.reasoning_effort, ReasoningEffort::kHigh);
    EXPECT_EQ(encode_chat(request, options),
              "<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜><think>");
  }
  {
    // "none" switches thinking off; max effort has no prefix in chat mode.
    auto request = request_with(R"(, "reasoning_effort": "none")");
    EXPECT_EQ(encode_chat(request, resolve_encode_options(request)),
              "<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜></think>");
    auto off = request_with(R"(, "reasoning_effort": "max", "thinking": {"type": "disabled"})");
    EXPECT_EQ(encode_chat(off, resolve_encode_options(off)),
              "<｜begin▁of▁sentence｜><｜User｜>x<｜Assistant｜></think>");
  }
  {
    auto request = request_with(R"(, "chat_template_kwargs": {"thinking": false})");
    EXPECT_EQ(resolve_encode_options(request).thinking_mode, ThinkingMode::kChat);
    auto enabled = request_with(R"(, "chat_template_kwargs": {"enable_thinking": true})");
    EXPECT_EQ(resolve_encode_options(enabled, false).thinking_mode, ThinkingMode::kThinking);
    auto unset = request_with("");
    EXPECT_EQ(resolve_encode_options(unset).thinking_mode, ThinkingMode::kThinking);
    EXPECT_EQ(resolve_encode_options(unset, false).thinking_mode, ThinkingMode::kChat);
  }
  EXPECT_THROW(resolve_encode_options(request_with(R"(, "reasoning_effort": "maximal")")), Error);
}

// A conversation continued with the model's own turn re-encodes to the same prefix, so the
// prefix cache hits: the prompt for turn N+1 starts with prompt N + generated text.
TEST(ChatEncoding, MultiTurnWithToolCallsKeepsThePrefix) {
  const char* tools = R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}}}}}])";
  Json body = Json::parse(R"({"messages": [{"role": "system", "content": "sys"},
                                            {"role": "user", "content": "weather?"}]})");
  body["tools"] = Json::parse(tools);
  ChatRequest request = parse_chat_request(body);
  const auto options = resolve_encode_options(request);
  const std::string prompt1 = encode_chat(request, options);
  ASSERT_TRUE(prompt1.ends_with("<｜Assistant｜><think>"));

  // What the model generated, and what a client sends back for it.
  const std::string generated =
      "Need the tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
  body["messages"].push_back(Json::parse(R"({"role": "assistant", "content": "",
      "reasoning_content": "Need the tool.", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 3}"}}]})"));
  body["messages"].push_back(
      Json::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "sunny"})"));
  const std::string prompt2 = encode_chat(parse_chat_request(body), options);
  ASSERT_TRUE(prompt2.starts_with(prompt1 + generated)) << prompt2;
  EXPECT_EQ(prompt2.substr(prompt1.size() + generated.size()),
            "<｜User｜><tool_result>sunny</tool_result><｜Assistant｜><think>");

  // Third turn: the final answer, then a new user message. With tools in play the earlier
  // reasoning stays, so the prefix still holds.
  const std::string answer = "Got it.</think>It is sunny.<｜end▁of▁sentence｜>";
  body["messages"].push_back(Json::parse(R"({"role": "assistant", "content": "It is sunny.",
      "reasoning_content": "Got it."})"));
  body["messages"].push_back(Json::parse(R"({"role": "user", "content": "thanks"})"));
  const std::string prompt3 = encode_chat(parse_chat_request(body), options);
  EXPECT_TRUE(prompt3.starts_with(prompt2 + answer)) << prompt3;
}

TEST(ChatEncoding, DropThinkingWithoutToolsBreaksOnlyTheReasoning) {
  // Without tools the previous turn's reasoning is dropped once a new user message arrives:
  // the prefix holds up to the assistant tag, which now reads "</think>" instead of "<think>".
  auto first = messages_of(R"([{"role": "user", "content": "a"}])");
  auto second = messages_of(R"([{"role": "user", "content": "a"},
      {"role": "assistant", "reasoning_content": "why", "content": "b"},
      {"role": "user", "content": "c"}])");
  EXPECT_EQ(encode_messages(first, thinking()),
            "<｜begin▁of▁sentence｜><｜User｜>a<｜Assistant｜><think>");
  EXPECT_EQ(encode_messages(second, thinking()),
            "<｜begin▁of▁sentence｜><｜User｜>a<｜Assistant｜></think>b<｜end▁of▁sentence｜>"
            "<｜User｜>c<｜Assistant｜><think>");
  ChatEncodeOptions keep = thinking();
  keep.drop_thinking = false;
  EXPECT_EQ(encode_messages(second, keep),
            "<｜begin▁of▁sentence｜><｜User｜>a<｜Assistant｜><think>why</think>b"
            "<｜end▁of▁sentence｜><｜User｜>c<｜Assistant｜><think>");
}

TEST(ChatEncoding, RequestToolsWithoutSystemMessageAndToolChoiceNone) {
  Json body = Json::parse(R"({"messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})");
  ChatRequest request = parse_chat_request(body);
  const std::string prompt = encode_chat(request, chat());
  EXPECT_TRUE(prompt.starts_with(std::string(dsv4::kBos) + "\n\n## Tools\n\n")) << prompt;
  EXPECT_NE(prompt.find("{\"name\": \"f\", \"parameters\": {}}\n\nYou MUST"), std::string::npos);

  body["tool_choice"] = "none";
  EXPECT_EQ(encode_chat(parse_chat_request(body), chat()),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>");
}

TEST(ChatEncoding, RequestToolsReplaceSystemMessageTools) {
  auto message_tools = R"([{"type": "function", "function": {"name": "old"}}])";
  Json body = Json::parse(R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": "u"}],
      "tools": [{"type": "function", "function": {"name": "new"}}]})");
  body["messages"][0]["tools"] = Json::parse(message_tools);
  const std::string prompt = encode_chat(parse_chat_request(body), chat());
  EXPECT_NE(prompt.find("{\"name\": \"new\"}"), std::string::npos);
  EXPECT_EQ(prompt.find("{\"name\": \"old\"}"), std::string::npos);
}

TEST(ChatEncoding, ToolCallArgumentsRenderLikeJsonDumps) {
  std::vector<ChatToolCall> calls{
      {"a", "f", R"({"s":"x\"y","n":1.50,"big":1e16,"small":0.00001,"l":[1,{"k":null}],"t":true})"},
      {"b", "g", "{}"},
      {"c", "h", "[1, 2]"},  // not an object: the encoder would crash; wrapped as a string
  };
  EXPECT_EQ(
      render_tool_calls(calls),
      "\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"s\" string=\"true\">x\"y</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"n\" string=\"false\">1.5</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"big\" string=\"false\">1e+16</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"small\" string=\"false\">1e-05</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"l\" string=\"false\">[1, {\"k\": null}]</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"t\" string=\"false\">true</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"g\">\n\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"h\">\n"
      "<｜DSML｜parameter name=\"arguments\" string=\"true\">[1, 2]</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>");
}

TEST(ChatEncoding, NullContentIsEmptyNotPythonNone) {
  // The reference writes Python's "None" for a null tool result or reminder; we write nothing.
  auto messages = messages_of(R"([{"role": "latest_reminder", "content": null},
      {"role": "user", "content": null},
      {"role": "tool", "tool_call_id": "x", "content": null}])");
  EXPECT_EQ(encode_messages(messages, chat()),
            "<｜begin▁of▁sentence｜><｜latest_reminder｜><｜User｜>\n\n<tool_result></tool_result>"
            "<｜Assistant｜></think>");
}

TEST(ChatEncoding, ContentPartsAreJoined) {
  auto messages = messages_of(R"([{"role": "user", "content": [{"type": "text", "text": "a"},
      {"type": "text", "text": "b"}]}])");
  EXPECT_EQ(encode_messages(messages, chat()),
            "<｜begin▁of▁sentence｜><｜User｜>a\n\nb<｜Assistant｜></think>");
}

}  // namespace
}  // namespace flint

namespace flint {
namespace {

std::size_t count_outside(const std::string& text, const std::string& needle,
                          const ClientSpans& spans) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    bool inside = false;
    for (const auto& s : spans) inside = inside || (at >= s.begin && at < s.end);
    count += inside ? 0 : 1;
  }
  return count;
}

std::size_t count_all(const std::string& text, const std::string& needle) {
  return count_outside(text, needle, {});
}

// Every client string of every golden conversation gets a "<｜User｜>" and a "</think>"
// appended: the prompt must hold exactly the markup of the unchanged conversation outside the
// reported client spans, and every injected copy inside them.
TEST(ChatEncoding, ClientSpansCoverEveryClientStringAndNoMarkup) {
  Json cases = testing::read_chat_json("encoder_goldens.json");
  const std::string kInjected = "<｜User｜></think>";
  for (const auto& item : cases) {
    SCOPED_TRACE(item["name"].get<std::string>());
    const ChatEncodeOptions options = golden_options(item["options"]);
    auto messages = parse_chat_messages(item["messages"]);
    const std::string plain = encode_messages(messages, options);
    ClientSpans unchanged_spans;
    EXPECT_EQ(encode_messages(messages, options, &unchanged_spans), plain);
    for (auto& m : messages) {
      if (m.content) *m.content += kInjected;
      if (m.reasoning_content) *m.reasoning_content += kInjected;
      for (auto& call : m.tool_calls) call.name += kInjected;
    }
    ClientSpans spans;
    const std::string injected = encode_messages(messages, options, &spans);
    for (std::size_t i = 1; i < spans.size(); ++i) ASSERT_LE(spans[i - 1].end, spans[i].begin);
    for (const char* marker : {"<｜User｜>", "</think>"}) {
      EXPECT_EQ(count_outside(injected, marker, spans), count_all(plain, marker)) << marker;
      EXPECT_GT(count_all(injected, marker), count_all(plain, marker)) << marker;
    }
  }
}

TEST(ChatEncoding, ClientSpansCoverToolSchemasAndArguments) {
  ChatRequest request = parse_chat_request(std::string_view(R"({
    "messages": [
      {"role": "user", "content": "hi"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": "{\"q\": \"<｜User｜>\", \"n\": {\"k\": \"<｜User｜>\"}}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "<｜User｜>"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "<｜User｜>",
      "parameters": {"type": "object"}}}]})"));
  ChatEncodeOptions options;
  options.thinking_mode = ThinkingMode::kChat;
  ClientSpans spans;
  const std::string prompt = encode_chat(request, options, &spans);
  EXPECT_EQ(prompt, encode_chat(request, options));
  // Markup: the two user turns' tags. Client text: description, two arguments, one result.
  EXPECT_EQ(count_outside(prompt, "<｜User｜>", spans), 2u);
  EXPECT_EQ(count_all(prompt, "<｜User｜>"), 6u);
}

}  // namespace
}  // namespace flint
