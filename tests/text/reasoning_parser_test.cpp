#include "text/reasoning_parser.h"

#include <gtest/gtest.h>

#include "stream_test_util.h"
#include "text/chat_markers.h"

namespace flint {
namespace {

using testing::Assembled;
using testing::expect_chunking_invariant;
using testing::run_reasoning_parser;
using Start = ReasoningParser::Start;

Assembled parse(std::string_view text, Start start = Start::kReasoning) {
  return run_reasoning_parser(text, {}, start);
}

TEST(ReasoningParser, StartFollowsThePrompt) {
  EXPECT_EQ(ReasoningParser::start_for_prompt("<｜User｜>x<｜Assistant｜><think>"),
            Start::kReasoning);
  EXPECT_EQ(ReasoningParser::start_for_prompt("<｜User｜>x<｜Assistant｜></think>"),
            Start::kContent);
  EXPECT_EQ(ReasoningParser::start_for_prompt("<｜Assistant｜><think><｜action｜>"),
            Start::kContent);
}

TEST(ReasoningParser, ThinkingMode) {
  // The reference encoder's README example.
  Assembled result = parse("Simple arithmetic.</think>2 + 2 = 4.<｜end▁of▁sentence｜>");
  EXPECT_EQ(result.reasoning, "Simple arithmetic.");
  EXPECT_EQ(result.content, "2 + 2 = 4.");
  EXPECT_TRUE(result.warnings.empty());
}

TEST(ReasoningParser, ChatModeIsAllContent) {
  Assembled result = parse("Hello </think> there", Start::kContent);
  EXPECT_EQ(result.reasoning, "");
  EXPECT_EQ(result.content, "Hello </think> there");
}

TEST(ReasoningParser, LeadingThinkTagOpensReasoning) {
  Assembled chat = parse("<think>hmm</think>ok", Start::kContent);
  EXPECT_EQ(chat.reasoning, "hmm");
  EXPECT_EQ(chat.content, "ok");
  Assembled duplicate = parse("<think>hmm</think>ok", Start::kReasoning);
  EXPECT_EQ(duplicate.reasoning, "hmm");
  Assembled not_leading = parse("a<think>b</think>c", Start::kReasoning);
  EXPECT_EQ(not_leading.reasoning, "a<think>b");
  EXPECT_EQ(not_leading.content, "c");
  // A lone prefix of <think> is just text.
  EXPECT_EQ(parse("<thi", Start::kContent).content, "<thi");
}

TEST(ReasoningParser, ToolCallWithoutThinkEndEndsReasoning) {
  // ds4 #318 / #167: the model went straight into a tool call without closing </think>.
  const std::string block =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>";
  Assembled result = parse("I should call f." + block + "<｜end▁of▁sentence｜>");
  EXPECT_EQ(result.reasoning, "I should call f.");
  EXPECT_EQ(result.content, block);  // handed on whole to the tool-call parser
  EXPECT_EQ(result.warnings.size(), 1u);
  // Without the blank line too.
  Assembled tight = parse("r<｜DSML｜tool_calls>x");
  EXPECT_EQ(tight.reasoning, "r");
  EXPECT_EQ(tight.content, "<｜DSML｜tool_calls>x");
}

TEST(ReasoningParser, TruncatedReasoningStaysReasoning) {
  Assembled result = parse("still thinking </thi");
  EXPECT_EQ(result.reasoning, "still thinking </thi");
  EXPECT_EQ(result.content, "");
  EXPECT_EQ(result.warnings.size(), 1u);
}

TEST(ReasoningParser, TextAfterEosIsDropped) {
  Assembled result = parse("r</think>c<｜end▁of▁sentence｜>junk");
  EXPECT_EQ(result.content, "c");
  EXPECT_EQ(result.warnings.size(), 1u);
  Assembled in_reasoning = parse("r<｜end▁of▁sentence｜>");
  EXPECT_EQ(in_reasoning.reasoning, "r");
  EXPECT_TRUE(in_reasoning.warnings.empty());
}

TEST(ReasoningParser, HoldsBackOnlyWhatCouldBeAMarker) {
  ReasoningParser parser(Start::kReasoning);
  EXPECT_EQ(parser.feed("abc</th").reasoning, "abc");
  ReasoningDelta d = parser.feed("ink>de");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "de");
  EXPECT_EQ(parser.feed("f\n").content, "f\n");  // content: only EOS is looked for
  EXPECT_EQ(parser.feed("<｜end").content, "");
  EXPECT_EQ(parser.feed("ing｜>").content, "<｜ending｜>");
  EXPECT_TRUE(parser.finish().empty());

  // An incomplete UTF-8 sequence waits for its last bytes.
  ReasoningParser utf8(Start::kReasoning);
  const std::string snow = "☃";  // 3 bytes
  EXPECT_EQ(utf8.feed("x" + snow.substr(0, 2)).reasoning, "x");
  EXPECT_EQ(utf8.feed(snow.substr(2)).reasoning, snow);
}

TEST(ReasoningParser, ChunkingInvariance) {
  const std::vector<std::pair<std::string, Start>> texts = {
      {"Let me think about 中文 and 😀.\n\nOK.</think>The answer\n\nis 4.<｜end▁of▁sentence｜>",
       Start::kReasoning},
      {"<think>re</think>co</think>more<think>x", Start::kContent},
      {"<think>re</think>co", Start::kReasoning},
      {"<thin", Start::kContent},
      {"r\n\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>",
       Start::kReasoning},
      {"a </ b </t c </think", Start::kReasoning},
      {"<｜end▁of▁sentence｜>trailing", Start::kContent},
      {"x\n\n<｜DSML｜tool_callz> y</think>z<｜end▁of▁sentence", Start::kReasoning},
  };
  for (const auto& [text, start] : texts) {
    SCOPED_TRACE(text);
    Assembled whole = expect_chunking_invariant(
        text, [start = start](std::string_view t, const std::vector<std::size_t>& cuts) {
          return run_reasoning_parser(t, cuts, start);
        });
    // Nothing is lost: what was not a marker comes out, in order.
    EXPECT_LE(whole.reasoning.size() + whole.content.size(), text.size());
  }
}

}  // namespace
}  // namespace flint
