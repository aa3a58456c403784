// Runs the streaming parsers over a text cut at given positions and collects what a client
// would assemble from the deltas, so that tests can compare any cut with the whole text.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "base/rng.h"
#include "text/completion_parser.h"
#include "text/dsml_parser.h"
#include "text/reasoning_parser.h"

namespace flint::testing {

// What a client ends up with after applying every delta.
struct Assembled {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> calls;
  std::vector<std::string> warnings;

  bool operator==(const Assembled&) const = default;
};

inline void PrintTo(const Assembled& a, std::ostream* os) {
  *os << "{reasoning=" << ::testing::PrintToString(a.reasoning)
      << " content=" << ::testing::PrintToString(a.content) << " calls=[";
  for (const auto& c : a.calls) *os << c.id << ":" << c.name << ":" << c.arguments << "; ";
  *os << "] warnings=" << a.warnings.size() << "}";
}

// Applies tool-call deltas the way an OpenAI client does; checks the delta protocol.
inline void apply_deltas(const std::vector<ToolCallDelta>& deltas,
                         std::vector<ParsedToolCall>& calls) {
  for (const auto& delta : deltas) {
    if (delta.index == static_cast<int>(calls.size())) {
      EXPECT_FALSE(delta.id.empty()) << "first delta of a call carries its id";
      EXPECT_FALSE(delta.name.empty()) << "first delta of a call carries its name";
      calls.push_back({delta.id, delta.name, ""});
    } else {
      ASSERT_LT(delta.index, static_cast<int>(calls.size()));
      EXPECT_TRUE(delta.id.empty() && delta.name.empty());
    }
    calls[static_cast<std::size_t>(delta.index)].arguments += delta.arguments;
  }
}

// The pieces of `text` between sorted cut positions.
inline std::vector<std::string_view> cut(std::string_view text, std::vector<std::size_t> cuts) {
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  for (std::size_t c : cuts) {
    if (c < start || c > text.size()) continue;
    pieces.push_back(text.substr(start, c - start));
    start = c;
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

inline Assembled run_tool_parser(std::string_view text, const std::vector<std::size_t>& cuts,
                                 std::span<const ToolDefinition> tools = {}) {
  ToolCallStreamParser parser({tools, counting_tool_call_ids()});
  Assembled result;
  for (auto piece : cut(text, cuts)) {
    ToolStreamDelta delta = parser.feed(piece);
    result.content += delta.content;
    apply_deltas(delta.tool_calls, result.calls);
  }
  ToolStreamDelta last = parser.finish();
  result.content += last.content;
  apply_deltas(last.tool_calls, result.calls);
  result.warnings = parser.warnings();
  // The deltas add up to the parser's own record of the calls.
  EXPECT_EQ(result.calls.size(), parser.calls().size());
  for (std::size_t i = 0; i < result.calls.size() && i < parser.calls().size(); ++i) {
    EXPECT_EQ(result.calls[i].arguments, parser.calls()[i].arguments);
    auto args = nlohmann::json::parse(result.calls[i].arguments, nullptr, false);
    EXPECT_TRUE(args.is_object()) << "arguments must be a JSON object: "
                                  << result.calls[i].arguments;
  }
  return result;
}

inline Assembled run_reasoning_parser(std::string_view text, const std::vector<std::size_t>& cuts,
                                      ReasoningParser::Start start) {
  ReasoningParser parser(start);
  Assembled result;
  for (auto piece : cut(text, cuts)) {
    ReasoningDelta delta = parser.feed(piece);
    result.reasoning += delta.reasoning;
    result.content += delta.content;
  }
  ReasoningDelta last = parser.finish();
  result.reasoning += last.reasoning;
  result.content += last.content;
  result.warnings = parser.warnings();
  return result;
}

inline Assembled run_completion_parser(std::string_view text, const std::vector<std::size_t>& cuts,
                                       ReasoningParser::Start start,
                                       std::span<const ToolDefinition> tools = {}) {
  CompletionParser parser({start, true, {tools, counting_tool_call_ids()}});
  Assembled result;
  auto add = [&](const CompletionDelta& delta) {
    result.reasoning += delta.reasoning;
    result.content += delta.content;
    apply_deltas(delta.tool_calls, result.calls);
  };
  for (auto piece : cut(text, cuts)) add(parser.feed(piece));
  add(parser.finish());
  ParsedCompletion whole = parser.result();
  EXPECT_EQ(whole.reasoning_content, result.reasoning);
  EXPECT_EQ(whole.content, result.content);
  result.warnings = whole.warnings;
  return result;
}

// Runs `run(text, cuts)` for every single cut, byte-by-byte feeding and `random_rounds` random
// multi-cuts, and expects each to equal the whole-text result, which it returns.
template <typename Run>
Assembled expect_chunking_invariant(std::string_view text, Run run, int random_rounds = 100) {
  const Assembled whole = run(text, {});
  for (std::size_t c = 0; c <= text.size(); ++c) {
    EXPECT_EQ(run(text, {c}), whole) << "cut at " << c;
  }
  std::vector<std::size_t> every;
  for (std::size_t c = 1; c < text.size(); ++c) every.push_back(c);
  EXPECT_EQ(run(text, every), whole) << "byte by byte";
  Rng rng(text.size() * 7919 + 17);
  for (int round = 0; round < random_rounds; ++round) {
    std::vector<std::size_t> cuts;
    const std::size_t n = 1 + rng.below(8);
    for (std::size_t i = 0; i < n; ++i) cuts.push_back(rng.below(text.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    EXPECT_EQ(run(text, cuts), whole) << "random round " << round;
  }
  return whole;
}

}  // namespace flint::testing
