#include "text/dsml_parser.h"

#include <gtest/gtest.h>

#include "stream_test_util.h"

namespace flint {
namespace {

using testing::Assembled;
using testing::expect_chunking_invariant;
using testing::run_tool_parser;

const std::vector<ToolDefinition>& weather_tools() {
  static const std::vector<ToolDefinition> tools = parse_tools(nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["c", "f"]}, "verbose": {"type": "boolean"},
        "ratio": {"type": "number"}, "tags": {"type": "array", "items": {"type": "integer"}},
        "opts": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "maybe": {"type": ["integer", "null"]}, "any": {},
        "choice": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]}}}}}])"));
  return tools;
}

std::string param(std::string_view name, std::string_view flag, std::string_view value) {
  return std::string("<｜DSML｜parameter name=\"") + std::string(name) + "\" string=\"" +
         std::string(flag) + "\">" + std::string(value) + "</｜DSML｜parameter>";
}

std::string invoke(std::string_view name, const std::vector<std::string>& params) {
  std::string out = std::string("<｜DSML｜invoke name=\"") + std::string(name) + "\">\n";
  for (std::size_t i = 0; i < params.size(); ++i) out += (i ? "\n" : "") + params[i];
  return out + "\n</｜DSML｜invoke>";
}

std::string block(const std::vector<std::string>& invokes) {
  std::string out = "\n\n<｜DSML｜tool_calls>\n";
  for (std::size_t i = 0; i < invokes.size(); ++i) out += (i ? "\n" : "") + invokes[i];
  return out + "\n</｜DSML｜tool_calls>";
}

Assembled parse(std::string_view text, std::span<const ToolDefinition> tools = weather_tools()) {
  return run_tool_parser(text, {}, tools);
}

TEST(DsmlParser, WellFormedBlock) {
  const std::string text =
      "Let me check." +
      block({invoke("get_weather", {param("city", "true", "Paris"), param("days", "false", "3")}),
             invoke("get_weather", {param("city", "true", "Oslo")})});
  Assembled result = parse(text);
  EXPECT_EQ(result.content, "Let me check.");
  ASSERT_EQ(result.calls.size(), 2u);
  EXPECT_EQ(result.calls[0].id, "call_0");
  EXPECT_EQ(result.calls[0].name, "get_weather");
  EXPECT_EQ(result.calls[0].arguments, R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(result.calls[1].arguments, R"({"city": "Oslo"})");
  EXPECT_TRUE(result.warnings.empty());
}

TEST(DsmlParser, ContentBeforeAndAfterAndNoParams) {
  Assembled result = parse("a" + block({invoke("get_weather", {})}) + "b");
  EXPECT_EQ(result.content, "ab");
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments, "{}");
  ASSERT_EQ(result.warnings.size(), 1u);  // the reference allows nothing after the block
  EXPECT_EQ(result.warnings[0], "text after the tool-call block kept as content");
}

TEST(DsmlParser, StreamsNameFirstThenStringFragments) {
  ToolCallStreamParser parser({weather_tools(), counting_tool_call_ids("id")});
  auto d1 = parser.feed("Hi\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n");
  EXPECT_EQ(d1.content, "Hi");
  ASSERT_EQ(d1.tool_calls.size(), 1u);
  EXPECT_EQ(d1.tool_calls[0].id, "id0");
  EXPECT_EQ(d1.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d1.tool_calls[0].arguments, "{");
  auto d2 = parser.feed("<｜DSML｜parameter name=\"city\" string=\"true\">Par");
  ASSERT_EQ(d2.tool_calls.size(), 1u);
  EXPECT_EQ(d2.tool_calls[0].arguments, "\"city\": \"Par");
  // A partial closing tag is held back, never leaked into the arguments (vLLM #53227).
  auto d3 = parser.feed("is</｜DSML｜param");
  ASSERT_EQ(d3.tool_calls.size(), 1u);
  EXPECT_EQ(d3.tool_calls[0].arguments, "is");
  auto d4 = parser.feed("eter>\n<｜DSML｜parameter name=\"days\" string=\"false\">1");
  EXPECT_EQ(d4.tool_calls[0].arguments, "\"");  // non-string values go out whole
  auto d5 = parser.feed("4</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  EXPECT_EQ(d5.tool_calls[0].arguments, ", \"days\": 14}");
  EXPECT_TRUE(parser.finish().empty());
  EXPECT_EQ(parser.calls()[0].arguments, R"({"city": "Paris", "days": 14})");
}

TEST(DsmlParser, PartialMarkerNeverLeaksIntoContent) {
  ToolCallStreamParser parser;
  EXPECT_EQ(parser.feed("Sure.\n").content, "Sure.");
  EXPECT_EQ(parser.feed("\n<｜DS").content, "");
  EXPECT_EQ(parser.feed("ML｜tool").content, "");
  auto d = parser.feed("_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  // A prefix that turns out not to be a marker is released as soon as that is certain.
  ToolCallStreamParser other;
  EXPECT_EQ(other.feed("x <｜DS").content, "x ");
  EXPECT_EQ(other.feed("K｜ y").content, "<｜DSK｜ y");
  EXPECT_EQ(other.feed("\n").content, "");
  EXPECT_EQ(other.finish().content, "\n");
}

TEST(DsmlParser, SchemaCoercion) {
  const std::string text = block({invoke(
      "get_weather", {param("city", "false", "123"), param("days", "true", "5"),
                      param("unit", "false", "\"c\""), param("verbose", "true", "True"),
                      param("ratio", "false", "0.50"), param("tags", "false", "[\"1\", 2]"),
                      param("opts", "true", "{\"n\": \"7\"}"), param("maybe", "true", "null"),
                      param("any", "false", "{\"a\":1}"), param("choice", "true", "false")})});
  Assembled result = parse(text);
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments,
            R"({"city": "123", "days": 5, "unit": "c", "verbose": true, "ratio": 0.50, )"
            R"("tags": [1, 2], "opts": {"n": 7}, "maybe": null, "any": {"a":1}, )"
            R"("choice": false})");
  EXPECT_TRUE(result.warnings.empty()) << result.warnings[0];
}

TEST(DsmlParser, ValuesThatCannotBeCoercedAreKeptWithAWarning) {
  Assembled result = parse(
      block({invoke("get_weather", {param("days", "false", "abc"), param("ratio", "true", "fast"),
                                    param("verbose", "false", "[1]")})}));
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments, R"({"days": "abc", "ratio": "fast", "verbose": [1]})");
  EXPECT_EQ(result.warnings.size(), 3u);
}

TEST(DsmlParser, UnknownToolIsParsedWithAWarning) {
  Assembled result =
      parse(block({invoke("search", {param("q", "true", "x"), param("n", "false", "1.0e3"),
                                     param("bad", "false", "not json")})}));
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].name, "search");
  EXPECT_EQ(result.calls[0].arguments, R"({"q": "x", "n": 1.0e3, "bad": "not json"})");
  EXPECT_EQ(result.warnings.size(), 2u);  // unknown tool, invalid JSON
}

TEST(DsmlParser, UnicodeAndEscapesInValues) {
  const std::string value = "中文 ☃ 😀 \"quoted\" back\\slash\ttab\nline \x01";
  Assembled result = parse(block({invoke("get_weather", {param("city", "true", value)})}));
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments,
            "{\"city\": \"中文 ☃ 😀 \\\"quoted\\\" back\\\\slash\\ttab\\nline \\u0001\"}");
  auto parsed = nlohmann::json::parse(result.calls[0].arguments);
  EXPECT_EQ(parsed["city"], value);
}

TEST(DsmlParser, MarkupLookingTextInsideValuesIsKept) {
  const std::string tricky =
      "<｜DSML｜invoke name=\"x\">\n<｜DSML｜parameter name=\"y\" string=\"true\">"
      " </｜DSML｜invoke> </｜DSML｜tool_calls> <｜DSML｜tool_calls>";
  Assembled result = parse(
      block({invoke("get_weather", {param("city", "true", tricky), param("days", "false", "2")})}));
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(result.calls[0].arguments)["city"], tricky);
  EXPECT_EQ(nlohmann::json::parse(result.calls[0].arguments)["days"], 2);
  EXPECT_TRUE(result.warnings.empty());
}

TEST(DsmlParser, MissingWrapperIsAccepted) {
  // vLLM #48931: at long context the model sometimes drops <｜DSML｜tool_calls>.
  Assembled result = parse("Checking.\n\n" + invoke("get_weather", {param("city", "true", "A")}) +
                           "\n" + invoke("get_weather", {param("city", "true", "B")}) + "\nDone");
  EXPECT_EQ(result.content, "Checking.\nDone");
  ASSERT_EQ(result.calls.size(), 2u);
  EXPECT_EQ(result.calls[1].arguments, R"({"city": "B"})");
}

TEST(DsmlParser, MissingInvokeCloseIsImplied) {
  const std::string text = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
                           param("city", "true", "A") +
                           "\n<｜DSML｜invoke name=\"get_weather\">\n" +
                           param("city", "true", "B") + "\n</｜DSML｜tool_calls>";
  Assembled result = parse(text);
  EXPECT_EQ(result.content, "");
  ASSERT_EQ(result.calls.size(), 2u);
  EXPECT_EQ(result.calls[0].arguments, R"({"city": "A"})");
  EXPECT_EQ(result.calls[1].arguments, R"({"city": "B"})");
  EXPECT_EQ(result.warnings.size(), 2u);
}

TEST(DsmlParser, MissingParameterCloseEndsAtInvokeClose) {
  const std::string text =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  Assembled result = parse(text);
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments, R"({"city": "Paris\n"})");
  EXPECT_EQ(result.content, "");
}

TEST(DsmlParser, MalformedMarkupBecomesContent) {
  {
    Assembled result = parse("text <｜DSML｜tool_calls>\nhello");
    EXPECT_EQ(result.content, "text <｜DSML｜tool_calls>\nhello");
    EXPECT_TRUE(result.calls.empty());
    EXPECT_EQ(result.warnings.size(), 1u);
  }
  {
    Assembled result =
        parse("x\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nme=\"f\">\n</｜DSML｜invoke>");
    EXPECT_EQ(result.content, "x\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nme=\"f\">\n");
    EXPECT_TRUE(result.calls.empty());
  }
  {
    // A call already announced is closed with what it has; the bad part becomes content.
    // (ds4 #42: the model switched to another XML dialect in the middle of a call.)
    Assembled result = parse("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
                             param("city", "true", "A") + "\n<task>Script</task>\n</function>");
    ASSERT_EQ(result.calls.size(), 1u);
    EXPECT_EQ(result.calls[0].arguments, R"({"city": "A"})");
    EXPECT_EQ(result.content, "\n<task>Script</task>\n</function>");
  }
}

TEST(DsmlParser, TruncatedOutput) {
  const std::string full =
      block({invoke("get_weather", {param("city", "true", "Paris"), param("days", "false", "3")})});
  {
    // Cut inside the first header: nothing was announced, the text comes back as content.
    std::string text = full.substr(0, full.find("get_w") + 5);
    Assembled result = parse(text);
    EXPECT_EQ(result.content, text);
    EXPECT_TRUE(result.calls.empty());
  }
  {
    // Cut inside a streamed string value: the call keeps the value as received.
    std::string text = full.substr(0, full.find("Paris") + 3);
    Assembled result = parse(text);
    ASSERT_EQ(result.calls.size(), 1u);
    EXPECT_EQ(result.calls[0].arguments, R"({"city": "Par"})");
    EXPECT_EQ(result.content, "");
  }
  {
    // Cut inside a partial closing tag, then inside a JSON value (which is dropped).
    std::string text = full.substr(0, full.find("</｜DSML｜parameter>") + 8);
    EXPECT_EQ(parse(text).calls.at(0).arguments, R"({"city": "Paris"})");
    text = full.substr(0, full.find("string=\"false\">3") + 15);
    Assembled result = parse(text);
    EXPECT_EQ(result.calls.at(0).arguments, R"({"city": "Paris"})");
    EXPECT_FALSE(result.warnings.empty());
  }
  {
    // Cut before </｜DSML｜tool_calls>: the complete call is kept, the partial tag dropped.
    std::string text = full.substr(0, full.size() - 6);
    Assembled result = parse(text);
    EXPECT_EQ(result.calls.at(0).arguments, R"({"city": "Paris", "days": 3})");
    EXPECT_EQ(result.content, "");
  }
}

TEST(DsmlParser, NestedBlockOpenerInsideInvoke) {
  const std::string text = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
                           block({invoke("get_weather", {param("city", "true", "B")})});
  Assembled result = parse(text);
  ASSERT_EQ(result.calls.size(), 2u);
  EXPECT_EQ(result.calls[0].arguments, "{}");
  EXPECT_EQ(result.calls[1].arguments, R"({"city": "B"})");
}

TEST(DsmlParser, DuplicateParameterAndStrayClosers) {
  Assembled result = parse(
      "a</｜DSML｜invoke>b" +
      block({invoke("get_weather", {param("city", "true", "A"), param("city", "true", "B")})}));
  EXPECT_EQ(result.content, "ab");
  ASSERT_EQ(result.calls.size(), 1u);
  EXPECT_EQ(result.calls[0].arguments, R"({"city": "A"})");
  EXPECT_EQ(result.warnings.size(), 2u);
}

TEST(DsmlParser, ParameterWithoutStringAttribute) {
  Assembled result = parse(block(
      {invoke("get_weather", {"<｜DSML｜parameter name=\"days\">4</｜DSML｜parameter>",
                              "<｜DSML｜parameter name=\"city\">Rome</｜DSML｜parameter>"})}));
  EXPECT_EQ(result.calls.at(0).arguments, R"({"days": 4, "city": "Rome"})");
}

// The property the streaming parser is built around: any cut of a text gives the whole-text
// result. Texts cover the cases above plus some adversarial ones.
TEST(DsmlParser, ChunkingInvariance) {
  const std::vector<std::string> texts = {
      "Let me check." +
          block({invoke("get_weather",
                        {param("city", "true", "Pa中ris😀"), param("days", "false", "3")}),
                 invoke("x", {param("a", "false", "{\"b\": [1, 2]}")})}) +
          " after",
      "plain text with < and <｜ and \n\n and ｜DSML｜ but no markup",
      block({invoke("get_weather",
                    {param("city", "true", "v </｜DSML｜invoke> w </｜DSML｜tool_calls> x")})}),
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">cut </｜DSML｜invoke> here",
      "x\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke nme=\"f\">\n</｜DSML｜invoke>y",
      "\n\n" + invoke("get_weather", {param("days", "true", "5")}) + "\n\nrest",
      "a</｜DSML｜parameter>b<｜DSML｜tool_calls><｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">"
      "<｜DSML｜parameter name=\"k\" string=\"true\">v</｜DSML｜parameter>"
      "<｜DSML｜parameter name=\"k\" string=\"false\">1</｜DSML｜parameter></｜DSML｜tool_calls>",
      block({invoke("get_weather", {param("tags", "false", "[\"1\", 2]"),
                                    param("opts", "true", "{\"n\": \"7\"}")})}) +
          block({invoke("get_weather", {})}),
  };
  for (const auto& text : texts) {
    SCOPED_TRACE(text);
    expect_chunking_invariant(text, [](std::string_view t, const std::vector<std::size_t>& cuts) {
      return run_tool_parser(t, cuts, weather_tools());
    });
  }
}

}  // namespace
}  // namespace flint
