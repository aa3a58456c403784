#include "text/completion_parser.h"

#include <utility>

namespace flint {

CompletionParser::CompletionParser(CompletionParserOptions options)
    : parse_tool_calls_(options.parse_tool_calls),
      reasoning_(options.start),
      tools_(std::move(options.tools)) {}

void CompletionParser::absorb(ReasoningDelta&& reasoning, ToolStreamDelta&& tools,
                              CompletionDelta& out) {
  out.reasoning += reasoning.reasoning;
  total_reasoning_ += reasoning.reasoning;
  out.content += tools.content;
  total_content_ += tools.content;
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
  absorb(std::move(reasoning), std::move(tools), out);
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
  absorb(std::move(reasoning), std::move(tools), out);
  return out;
}

ParsedCompletion CompletionParser::result() const {
  ParsedCompletion result;
  result.reasoning_content = total_reasoning_;
  result.content = total_content_;
  result.tool_calls = tools_.calls();
  result.warnings = reasoning_.warnings();
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
