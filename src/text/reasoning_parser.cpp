#include "text/reasoning_parser.h"

#include <array>

#include "text/chat_markers.h"
#include "text/marker_scan.h"

namespace flint {
namespace {

// Markers that end reasoning, in priority order at equal positions.
constexpr std::array<std::string_view, 4> kReasoningMarkers{
    dsv4::kThinkEnd, dsv4::kToolCallsOpenWithBreak, dsv4::kToolCallsOpen, dsv4::kEos};
constexpr int kThinkEnd = 0;
constexpr int kEos = 3;

constexpr std::array<std::string_view, 1> kContentMarkers{dsv4::kEos};

// Hands out text[0:end) unless it ends inside a UTF-8 sequence; returns how much was taken.
std::size_t take(std::string& pending, std::size_t end, std::string& out) {
  const std::size_t n = utf8_complete_prefix(std::string_view(pending).substr(0, end));
  out.append(pending, 0, n);
  pending.erase(0, n);
  return n;
}

}  // namespace

ReasoningParser::Start ReasoningParser::start_for_prompt(std::string_view prompt) {
  return prompt.ends_with(dsv4::kThinkStart) ? Start::kReasoning : Start::kContent;
}

ReasoningParser::ReasoningParser(Start start) : start_(start) {}

ReasoningDelta ReasoningParser::feed(std::string_view chunk) {
  ReasoningDelta out;
  if (state_ == State::kDone) {
    text_after_eos_ = text_after_eos_ || !chunk.empty();
    return out;
  }
  pending_.append(chunk);
  process(out);
  return out;
}

void ReasoningParser::process(ReasoningDelta& out) {
  while (true) {
    switch (state_) {
      case State::kLeading: {
        const TagMatch match = match_tag(pending_, dsv4::kThinkStart);
        if (match == TagMatch::kPartial) return;  // includes an empty pending_
        if (match == TagMatch::kFull) pending_.erase(0, dsv4::kThinkStart.size());
        state_ = (match == TagMatch::kFull || start_ == Start::kReasoning) ? State::kReasoning
                                                                           : State::kContent;
        break;
      }
      case State::kReasoning: {
        const MarkerHit hit = find_first_marker(pending_, kReasoningMarkers);
        if (hit.marker < 0) {
          take(pending_, hit.pos, out.reasoning);
          return;
        }
        out.reasoning.append(pending_, 0, hit.pos);
        pending_.erase(0, hit.pos);
        if (hit.marker == kThinkEnd) {
          pending_.erase(0, dsv4::kThinkEnd.size());
          state_ = State::kContent;
        } else if (hit.marker == kEos) {
          text_after_eos_ = pending_.size() > dsv4::kEos.size();
          pending_.clear();
          state_ = State::kDone;
        } else {
          // The tool-call block stays in pending_ and goes out as content.
          warnings_.push_back("reasoning ended by a tool call without </think>");
          state_ = State::kContent;
        }
        break;
      }
      case State::kContent: {
        const MarkerHit hit = find_first_marker(pending_, kContentMarkers);
        if (hit.marker < 0) {
          take(pending_, hit.pos, out.content);
          return;
        }
        out.content.append(pending_, 0, hit.pos);
        text_after_eos_ = pending_.size() > hit.pos + dsv4::kEos.size();
        pending_.clear();
        state_ = State::kDone;
        break;
      }
      case State::kDone:
        return;
    }
  }
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  process(out);
  switch (state_) {
    case State::kLeading:  // a lone prefix of "<think>": ordinary text
      (start_ == Start::kReasoning ? out.reasoning : out.content) += pending_;
      break;
    case State::kReasoning:
      out.reasoning += pending_;
      warnings_.push_back("output ended inside reasoning (no </think>)");
      break;
    case State::kContent:
      out.content += pending_;
      break;
    case State::kDone:
      break;
  }
  pending_.clear();
  if (text_after_eos_) warnings_.push_back("text after the end-of-sentence marker was dropped");
  text_after_eos_ = false;
  state_ = State::kDone;
  return out;
}

ReasoningDelta ReasoningParser::parse(std::string_view text, Start start) {
  ReasoningParser parser(start);
  ReasoningDelta out = parser.feed(text);
  ReasoningDelta rest = parser.finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace flint
