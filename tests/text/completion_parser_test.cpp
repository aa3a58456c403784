#include "text/completion_parser.h"

#include <gtest/gtest.h>

#include "chat_test_util.h"
#include "stream_test_util.h"
#include "text/chat_encoding.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;
using testing::Assembled;
using testing::expect_chunking_invariant;
using testing::run_completion_parser;
using Start = ReasoningParser::Start;

// Completions written by the reference encoder and what its parser returns for them
// (data/chat/parse_goldens.json, from generate_goldens.py).
TEST(CompletionParser, MatchesReferenceParserOnWellFormedOutput) {
  Json cases = testing::read_chat_json("parse_goldens.json");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& item : cases) {
    SCOPED_TRACE(item["name"].get<std::string>());
    const std::string text = item["completion"];
    const Start start = item["thinking_mode"] == "thinking" ? Start::kReasoning : Start::kContent;
    Assembled result = expect_chunking_invariant(
        text,
        [start](std::string_view t, const std::vector<std::size_t>& cuts) {
          return run_completion_parser(t, cuts, start);
        },
        20);
    const Json& expected = item["expected"];
    EXPECT_EQ(result.reasoning, expected["reasoning_content"].get<std::string>());
    EXPECT_EQ(result.content, expected["content"].get<std::string>());
    ASSERT_EQ(result.calls.size(), expected["tool_calls"].size());
    for (std::size_t i = 0; i < result.calls.size(); ++i) {
      EXPECT_EQ(result.calls[i].name, expected["tool_calls"][i]["name"].get<std::string>());
      // Byte for byte, so the call renders back to the text the model generated.
      EXPECT_EQ(result.calls[i].arguments,
                expected["tool_calls"][i]["arguments"].get<std::string>());
    }
    // Only warning allowed: unknown tools (no schemas are given here).
    for (const auto& warning : result.warnings) {
      EXPECT_TRUE(warning.starts_with("call of unknown tool")) << warning;
    }
  }
}

// Parse what the model generated, send it back as the client would, and re-encode: the new
// prompt must start with the old prompt followed by exactly the generated text.
TEST(CompletionParser, RoundTripThroughTheEncoderKeepsThePrefix) {
  Json body = Json::parse(R"({"messages": [{"role": "user", "content": "plan a trip"}],
      "tools": [{"type": "function", "function": {"name": "book", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "nights": {"type": "integer"},
        "extras": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object"}}}}}]})");
  ChatRequest request = parse_chat_request(body);
  const ChatEncodeOptions options = resolve_encode_options(request);
  const std::string prompt = encode_chat(request, options);

  const std::string generated =
      "Book it.</think>Booking now.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"book\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Zürich \"old town\"\n2 "
      "lines</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"nights\" string=\"false\">3</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"extras\" string=\"false\">[\"spa\", \"late checkout\"]"
      "</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"options\" string=\"false\">{\"ratio\": 0.5, \"x\": null}"
      "</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"book\">\n\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
  ParsedCompletion parsed = parse_completion(
      generated,
      {ReasoningParser::start_for_prompt(prompt), true, {request.tools, counting_tool_call_ids()}});
  EXPECT_TRUE(parsed.warnings.empty());
  ASSERT_EQ(parsed.tool_calls.size(), 2u);

  Json assistant = {{"role", "assistant"},
                    {"content", parsed.content},
                    {"reasoning_content", parsed.reasoning_content},
                    {"tool_calls", Json::array()}};
  for (const auto& call : parsed.tool_calls) {
    assistant["tool_calls"].push_back(
        {{"id", call.id},
         {"type", "function"},
         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  body["messages"].push_back(assistant);
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "ok"}});
  body["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_0"}, {"content", "ok0"}});
  const std::string next = encode_chat(parse_chat_request(body), options);
  ASSERT_TRUE(next.starts_with(prompt + generated)) << next;
  // Results come back in call order.
  EXPECT_EQ(next.substr(prompt.size() + generated.size()),
            "<｜User｜><tool_result>ok0</tool_result>\n\n<tool_result>ok</tool_result>"
            "<｜Assistant｜><think>");
}

TEST(CompletionParser, ReasoningThenToolCallWithoutThinkEnd) {
  const std::string text =
      "Need data\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
      "<｜DSML｜parameter name=\"q\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
  Assembled result =
      expect_chunking_invariant(text, [](std::string_view t, const std::vector<std::size_t>& cuts) {
        return run_completion_parser(t, cuts, Start::kReasoning);
      });
  EXPECT_EQ(result.reasoning, "Need data");
  EXPECT_EQ(result.content, "");
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments, R"({"q": "x"})");
}

// Random texts built from markup fragments, partial markers and multi-byte characters: every
// way of cutting them gives the whole-text result (the fuzz targets do the same at length).
TEST(CompletionParser, RandomTextsAreChunkingInvariant) {
  static const std::vector<ToolDefinition> tools = parse_tools(Json::parse(R"([{"type": "function",
      "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "integer"}, "o": {"type": "object",
        "properties": {"k": {"type": "integer"}}}}}}}])"));
  const std::vector<std::string> fragments = {
      "<think>",
      "</think>",
      "\n\n",
      "\n",
      "<｜DSML｜tool_calls>",
      "</｜DSML｜tool_calls>",
      "<｜DSML｜invoke name=\"f\">",
      "<｜DSML｜invoke name=\"g\">",
      "</｜DSML｜invoke>",
      "<｜DSML｜parameter name=\"s\" string=\"true\">",
      "<｜DSML｜parameter name=\"n\" string=\"false\">",
      "<｜DSML｜parameter name=\"o\">",
      "</｜DSML｜parameter>",
      "<｜end▁of▁sentence｜>",
      "<｜DSML｜",
      "</｜DS",
      "<",
      ">",
      "\"",
      "abc",
      "中文",
      "😀",
      "12",
      "[1, \"2\"]",
      "{\"k\": \"3\"}",
      " ",
      "\xE4",
      "\xBD",
  };
  Rng rng(2024);
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const std::size_t count = 1 + rng.below(30);
    for (std::size_t i = 0; i < count; ++i) text += fragments[rng.below(fragments.size())];
    const Start start = round % 2 ? Start::kReasoning : Start::kContent;
    auto run = [&](std::string_view t, const std::vector<std::size_t>& cuts) {
      return run_completion_parser(t, cuts, start, tools);
    };
    const Assembled whole = run(text, {});
    std::vector<std::size_t> every;
    for (std::size_t c = 1; c < text.size(); ++c) every.push_back(c);
    ASSERT_EQ(run(text, every), whole) << text;
    for (int k = 0; k < 5; ++k) {
      std::vector<std::size_t> cuts;
      for (std::size_t i = 0, n = 1 + rng.below(6); i < n; ++i)
        cuts.push_back(rng.below(text.size() + 1));
      std::sort(cuts.begin(), cuts.end());
      ASSERT_EQ(run(text, cuts), whole) << text;
    }
  }
}

TEST(CompletionParser, ToolParsingCanBeSwitchedOff) {
  ParsedCompletion parsed =
      parse_completion("</think>a\n\n<｜DSML｜tool_calls>", {Start::kReasoning, false, {}});
  EXPECT_EQ(parsed.content, "a\n\n<｜DSML｜tool_calls>");
  EXPECT_TRUE(parsed.tool_calls.empty());
}

}  // namespace
}  // namespace flint

namespace flint {
namespace {

// A model that "closes" its reasoning twice: the stray tag is markup, never content, however
// the text is cut into chunks; tool-call values keep whatever they hold.
TEST(CompletionParser, StrayThinkTagsLeaveTheContentInAnyChunking) {
  const std::string text =
      "why</think>Hello </think>world<think>!\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke "
      "name=\"f\">\n<｜DSML｜parameter name=\"q\" string=\"true\">a</think>b</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls></thi";
  for (std::size_t cut = 1; cut <= 7; ++cut) {
    CompletionParserOptions o;
    o.tools.make_id = counting_tool_call_ids();
    CompletionParser parser(o);
    std::string content;
    for (std::size_t i = 0; i < text.size(); i += cut) {
      content += parser.feed(std::string_view(text).substr(i, cut)).content;
    }
    content += parser.finish().content;
    const ParsedCompletion r = parser.result();
    EXPECT_EQ(r.reasoning_content, "why");
    EXPECT_EQ(content, "Hello world!</thi") << cut;
    EXPECT_EQ(r.content, content);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].arguments, R"({"q": "a</think>b"})");
  }
}

}  // namespace
}  // namespace flint
