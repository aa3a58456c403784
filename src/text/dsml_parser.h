// The deepseek_v4 tool-call parser: DSML markup in generated content -> OpenAI tool calls.
//
//   \n\n<｜DSML｜tool_calls>
//   <｜DSML｜invoke name="get_weather">
//   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
//   </｜DSML｜invoke>
//   </｜DSML｜tool_calls>
// becomes the call get_weather with arguments {"city": "Paris", "days": 3} (Python json.dumps
// style, keys in the order written; values converted by the tool's JSON schema, see
// json_schema_coerce.h). The "\n\n" before the block belongs to the markup, as in DeepSeek's
// encoder; text before and after the block is content.
//
// Streaming: feed() returns content and tool-call deltas as soon as they are certain. A call's
// first delta carries its index, id and name (and "{"); later deltas carry argument fragments
// whose concatenation is exactly the final arguments text. String parameters stream as they are
// generated; other values go out whole once their closing tag arrives. Content never contains
// any part of well-formed markup: text that could be the start of a marker (even split across
// chunks) is held back until it is decided, as is an incomplete UTF-8 sequence.
//
// Malformed markup never throws, crashes or hangs; it is reported in warnings():
// - markup that cannot be parsed is returned as content, from the point where the parser last
//   made sense of it; calls already announced are closed with the parameters they have;
// - a missing </｜DSML｜invoke> before the next invoke or </｜DSML｜tool_calls> is implied;
//   an invoke without the <｜DSML｜tool_calls> wrapper is accepted; a missing
//   </｜DSML｜tool_calls> ends the block at the first text that is not markup;
// - a parameter value ends only at </｜DSML｜parameter> (the encoder's rule, so markup-looking
//   text inside values is kept); if the output ends inside a value that contains
//   </｜DSML｜invoke>, the value is cut there;
// - truncated output (max_tokens) keeps every call already announced, closed with its complete
//   parameters (and a partially streamed string value as received); an unannounced partial
//   call is dropped, or returned as content if the block had no call yet;
// - stray closing tags in content are dropped; unknown tool names and duplicate parameters are
//   kept (the duplicate's value is skipped); text after a block stays content (a warning).
// The result does not depend on how the text is cut into chunks (tests and a fuzz target check
// this). Memory: the unparsed tail plus the value being buffered.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_types.h"
#include "text/json_schema_coerce.h"

namespace flint {

struct ToolCallDelta {
  int index = 0;
  std::string id;         // set in the first delta of a call only
  std::string name;       // set in the first delta of a call only
  std::string arguments;  // a fragment of the arguments JSON text
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && tool_calls.empty(); }
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object

  bool operator==(const ParsedToolCall&) const = default;
};

// Makes the id of each new call. OpenAI style is "call_" + 24 random letters and digits.
using ToolCallIdGenerator = std::function<std::string()>;
ToolCallIdGenerator random_tool_call_ids();
// "call_0", "call_1", ... for tests and reproducible output.
ToolCallIdGenerator counting_tool_call_ids(std::string prefix = "call_");

struct ToolParserOptions {
  std::span<const ToolDefinition> tools;  // schemas used for conversion; must outlive the parser
  ToolCallIdGenerator make_id;            // random_tool_call_ids() when empty
};

class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolParserOptions options = {});

  ToolStreamDelta feed(std::string_view chunk);
  // Ends the stream: flushes held-back content, closes or drops unfinished markup.
  ToolStreamDelta finish();

  // Calls announced so far, arguments as far as received (complete after finish()).
  const std::vector<ParsedToolCall>& calls() const { return calls_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  enum class State { kContent, kBetweenInvokes, kInvokeHeader, kParams, kParamHeader, kValue };

  bool step();  // one parsing step on buf_; false when more text is needed
  bool step_content();
  bool step_between_invokes();
  bool step_invoke_header();
  bool step_params();
  bool step_param_header();
  bool step_value();
  bool reject_header(std::size_t consumed, std::string_view tag);
  void finish_value(bool truncated);
  void start_param(std::string name, DsmlValueKind kind);
  std::string key_prefix(const std::string& name);  // `"name": ` after ", " if not first
  void append_value(std::string_view text);
  void announce_call(std::string name);
  void close_call();
  void end_block();
  void recover(std::string_view why);  // malformed markup: back to content
  void emit_content(std::string_view text);
  void emit_arguments(std::string_view fragment);
  void warn(std::string message);

  ToolParserOptions options_;
  State state_ = State::kContent;
  std::string_view pending() const { return std::string_view(buf_).substr(pos_); }
  void consume(std::size_t n) { pos_ += n; }

  std::string buf_;      // received text; buf_[pos_:] is not parsed yet
  std::size_t pos_ = 0;  // compacted at the end of each feed()
  std::string raw_;      // markup consumed since the last complete piece; content if it turns bad
  bool block_has_calls_ = false;
  bool implicit_block_ = false;  // invoke without a <｜DSML｜tool_calls> wrapper
  bool after_block_ = false;     // content follows a closed block (warn once if not blank)

  // The call being parsed.
  bool call_open_ = false;
  const ToolDefinition* tool_ = nullptr;
  std::vector<std::string> keys_;  // parameters written so far (duplicates are skipped)

  // The parameter being parsed.
  std::string param_;
  DsmlValueKind kind_ = DsmlValueKind::kString;
  bool streaming_ = false;  // string value streamed as JSON string fragments
  bool skip_ = false;       // duplicate parameter: value consumed and ignored
  std::string value_;       // buffered value text (not streaming)
  bool holding_ = false;    // inside the value, after a "</｜DSML｜invoke>" (see header)
  std::string held_;

  std::vector<ParsedToolCall> calls_;
  std::vector<std::string> warnings_;
  ToolStreamDelta out_;  // output of the current feed()/finish()
};

struct ToolCallParseResult {
  std::string content;
  std::vector<ParsedToolCall> calls;
  std::vector<std::string> warnings;
};

// Whole text at once: the same as feed(text) then finish().
ToolCallParseResult parse_tool_calls(std::string_view text, ToolParserOptions options = {});

}  // namespace flint
