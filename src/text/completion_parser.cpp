#include "text/completion_parser.h"

#include <array>
#include <utility>

#include "text/chat_markers.h"
#include "text/marker_scan.h"

namespace flint {

CompletionParser::CompletionParser(CompletionParserOptions options)
    : parse_tool_calls_(options.parse_tool_calls),
      reasoning_(options.start),
      tools_(std::move(options.tools)) {}

std::string CompletionParser::strip_think_tags(std::string_view content, bool final) {
  static constexpr std::array<std::string_view, 2> kTags{dsv4::kThinkStart, dsv4::kThinkEnd};
  think_pending_ += content;
  std::string out;
  std::size_t from = 0;
  for (;;) {
    const MarkerHit hit = find_first_marker(think_pending_, kTags, from);
    out.append(think_pending_, from, hit.pos - from);
    from = hit.pos;
    if (hit.marker < 0) break;
    stripped_tag_ = true;
    from += kTags[static_cast<std::size_t>(hit.marker)].size();
  }
  // think_pending_[from:] may be the start of a tag; at the end it is text after all.
  if (final) {
    out.append(think_pending_, from);
    think_pending_.clear();
  } else {
    think_pending_.erase(0, from);
  }
  return out;
}

void CompletionParser::absorb(ReasoningDelta&& reasoning, ToolStreamDelta&& tools,
                              CompletionDelta& out, bool final) {
  out.reasoning += reasoning.reasoning;
  total_reasoning_ += reasoning.reasoning;
  const std::string content = strip_think_tags(tools.content, final);
  out.content += content;
  total_content_ += content;
  for (auto& call : tools.tool_calls) out.tool_calls.push_back(std::move(call));
}

CompletionDelta CompletionParser::feed(std::string_view chunk) {
  CompletionDelta out;
  ReasoningDelta reasoning = reasoning_.feed(chunk);
  ToolStreamDelta tools;
  if (parse_tool_calls_) {
    tools = tools_.feed(reasoning.content);
  } else {
    tools.content = std::move(reasoning.content);
  }
  absorb(std::move(reasoning), std::move(tools), out, false);
  return out;
}

CompletionDelta CompletionParser::finish() {
  CompletionDelta out;
  ReasoningDelta reasoning = reasoning_.finish();
  ToolStreamDelta tools;
  if (parse_tool_calls_) {
    tools = tools_.feed(reasoning.content);
    ToolStreamDelta rest = tools_.finish();
    tools.content += rest.content;
    for (auto& call : rest.tool_calls) {
      // Fragments of the same call from feed() and finish() merge into one delta.
      if (!tools.tool_calls.empty() && tools.tool_calls.back().index == call.index &&
          call.id.empty()) {
        tools.tool_calls.back().arguments += call.arguments;
      } else {
        tools.tool_calls.push_back(std::move(call));
      }
    }
  } else {
    tools.content = std::move(reasoning.content);
  }
  absorb(std::move(reasoning), std::move(tools), out, true);
  return out;
}

ParsedCompletion CompletionParser::result() const {
  ParsedCompletion result;
  result.reasoning_content = total_reasoning_;
  result.content = total_content_;
  result.tool_calls = tools_.calls();
  result.warnings = reasoning_.warnings();
  if (stripped_tag_) result.warnings.push_back("stray <think> / </think> tags dropped from content");
  for (const auto& warning : tools_.warnings()) result.warnings.push_back(warning);
  return result;
}

ParsedCompletion parse_completion(std::string_view text, CompletionParserOptions options) {
  CompletionParser parser(std::move(options));
  parser.feed(text);
  parser.finish();
  return parser.result();
}

}  // namespace flint
