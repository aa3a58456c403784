// Generated text -> assistant message: the reasoning parser followed by the DSML tool-call
// parser, streaming or whole. Stray <think> / </think> tags in the content (outside tool-call
// values) are dropped with a warning, so that no markup reaches the client's content. The native counterpart of the reference encoder's
// parse_message_from_completion_text(), but tolerant: where the reference raises on malformed
// output, this returns what it can with warnings (see reasoning_parser.h and dsml_parser.h).
//
// For well-formed output it returns what the reference returns; in particular a tool call's
// arguments text equals the reference's when no tool schema is given (the parameters' own JSON
// text is kept), so the conversation re-encodes to the bytes the model generated.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/dsml_parser.h"
#include "text/reasoning_parser.h"

namespace flint {

struct CompletionParserOptions {
  ReasoningParser::Start start = ReasoningParser::Start::kReasoning;
  bool parse_tool_calls = true;  // false: DSML stays in content (not recommended, see docs)
  ToolParserOptions tools;
};

struct CompletionDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ParsedCompletion {
  std::string reasoning_content;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  std::vector<std::string> warnings;
};

class CompletionParser {
 public:
  explicit CompletionParser(CompletionParserOptions options);

  CompletionDelta feed(std::string_view chunk);
  CompletionDelta finish();  // call once, after the last feed()

  // Everything so far (the complete message after finish()). Cost: copies the totals.
  ParsedCompletion result() const;

 private:
  void absorb(ReasoningDelta&& reasoning, ToolStreamDelta&& tools, CompletionDelta& out,
              bool final);
  // Content without stray <think> / </think> tags (a model that "closes" its reasoning twice):
  // they are markup, never text for the client. Held back while a tag may be forming.
  std::string strip_think_tags(std::string_view content, bool final);

  bool parse_tool_calls_;
  ReasoningParser reasoning_;
  ToolCallStreamParser tools_;
  std::string total_reasoning_;
  std::string total_content_;
  std::string think_pending_;  // content that may be the start of a think tag
  bool stripped_tag_ = false;
};

// Whole text at once: the same as feed(text) then finish().
ParsedCompletion parse_completion(std::string_view text, CompletionParserOptions options);

}  // namespace flint
