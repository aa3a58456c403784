// Splits DeepSeek-V4's generated text into reasoning_content and content (the deepseek_v4
// reasoning parser), for a whole response or incrementally as text streams in.
//
// The prompt decides where generation starts: thinking mode ends the prompt with
// "<｜Assistant｜><think>", so the output opens with reasoning and "</think>" switches to
// content; chat mode ends it with "</think>" and everything is content. On top of that:
// - a "<think>" at the very start of the output (re)opens reasoning and is dropped;
// - the start of a DSML tool-call block ("\n\n<｜DSML｜tool_calls>") inside reasoning ends the
//   reasoning there, for a model that forgot "</think>" and went straight into a tool call;
//   the block itself is passed on as content for the tool-call parser;
// - the EOS marker ends the output (text after it is dropped, with a warning).
//
// Streaming guarantee: for any way of cutting a text into chunks, the concatenated deltas of
// feed()... + finish() equal those of feed(whole) + finish(); no character is lost or doubled.
// Text that might be the start of a marker is held back until it is decided, and so is an
// incomplete UTF-8 sequence at the end of a chunk. Memory: the held-back tail only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flint {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
 public:
  enum class Start { kReasoning, kContent };

  // kReasoning when the prompt ends with "<think>" (thinking mode), else kContent.
  static Start start_for_prompt(std::string_view prompt);

  explicit ReasoningParser(Start start);

  ReasoningDelta feed(std::string_view chunk);
  // Flushes everything held back. Call once, after the last feed().
  ReasoningDelta finish();

  // Whole text at once: the same as feed(text) then finish().
  static ReasoningDelta parse(std::string_view text, Start start);

  bool in_reasoning() const { return state_ == State::kReasoning || state_ == State::kLeading; }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  enum class State { kLeading, kReasoning, kContent, kDone };

  void process(ReasoningDelta& out);

  Start start_;
  State state_ = State::kLeading;
  std::string pending_;  // text not yet handed out (a possible marker start, a partial UTF-8)
  bool text_after_eos_ = false;
  std::vector<std::string> warnings_;
};

}  // namespace flint
