#include "text/dsml_parser.h"

#include <algorithm>
#include <array>
#include <random>

#include <fmt/format.h>

#include "text/chat_markers.h"
#include "text/marker_scan.h"
#include "text/py_json.h"

namespace flint {
namespace {

constexpr std::string_view kInvokeOpenWithBreak = "\n\n<｜DSML｜invoke";

// Markers looked for in content, in priority order at equal positions: block starts (with or
// without the wrapper, with or without the "\n\n" that belongs to the markup), then stray
// closing tags, which are dropped.
constexpr std::array<std::string_view, 7> kContentMarkers{
    dsv4::kToolCallsOpenWithBreak, dsv4::kToolCallsOpen, kInvokeOpenWithBreak, dsv4::kInvokeOpen,
    dsv4::kToolCallsClose,         dsv4::kInvokeClose,   dsv4::kParamClose};

constexpr std::array<std::string_view, 2> kValueEnds{dsv4::kParamClose, dsv4::kInvokeClose};
constexpr std::array<std::string_view, 1> kParamEnd{dsv4::kParamClose};

// Limits that keep a header from being buffered forever. They apply at fixed positions of the
// text, so the outcome does not depend on how the text is cut.
constexpr std::size_t kMaxHeaderBytes = 2048;

enum class Parse { kNeedMore, kBad, kOk };

// A cursor over a tag's attributes (` name="x" string="true">`).
struct HeaderReader {
  std::string_view text;
  std::size_t pos = 0;

  bool at_limit() const { return pos >= kMaxHeaderBytes; }

  Parse skip_space() {
    while (pos < text.size() && !at_limit() && is_ascii_space(text[pos])) ++pos;
    if (at_limit()) return Parse::kBad;
    return pos < text.size() ? Parse::kOk : Parse::kNeedMore;
  }

  Parse literal(std::string_view expected) {
    for (char c : expected) {
      if (at_limit()) return Parse::kBad;
      if (pos >= text.size()) return Parse::kNeedMore;
      if (text[pos] != c) return Parse::kBad;
      ++pos;
    }
    return Parse::kOk;
  }

  // `attr="value"` after optional spaces; the value may not contain < > or a line break.
  Parse attribute(std::string_view attr, std::string& value) {
    if (Parse p = skip_space(); p != Parse::kOk) return p;
    if (Parse p = literal(attr); p != Parse::kOk) return p;
    if (Parse p = literal("=\""); p != Parse::kOk) return p;
    const std::size_t start = pos;
    while (true) {
      if (at_limit()) return Parse::kBad;
      if (pos >= text.size()) return Parse::kNeedMore;
      const char c = text[pos];
      if (c == '"') break;
      if (c == '<' || c == '>' || c == '\n') return Parse::kBad;
      ++pos;
    }
    value.assign(text.substr(start, pos - start));
    ++pos;
    return Parse::kOk;
  }

  Parse close() {
    if (Parse p = skip_space(); p != Parse::kOk) return p;
    return literal(">");
  }
};

struct Header {
  Parse status = Parse::kNeedMore;
  std::size_t consumed = 0;  // bytes of the header (kOk), or where it went wrong (kBad)
  std::string name;
  DsmlValueKind kind = DsmlValueKind::kUnspecified;
};

Header parse_invoke_header(std::string_view text) {
  HeaderReader reader{text};
  Header header;
  header.status = reader.attribute("name", header.name);
  if (header.status == Parse::kOk && header.name.empty()) header.status = Parse::kBad;
  if (header.status == Parse::kOk) header.status = reader.close();
  header.consumed = reader.pos;
  return header;
}

Header parse_param_header(std::string_view text) {
  HeaderReader reader{text};
  Header header;
  header.status = reader.attribute("name", header.name);
  if (header.status == Parse::kOk) header.status = reader.skip_space();
  if (header.status == Parse::kOk && text[reader.pos] != '>') {
    std::string flag;
    header.status = reader.attribute("string", flag);
    if (flag == "true") header.kind = DsmlValueKind::kString;
    if (flag == "false") header.kind = DsmlValueKind::kJson;
  }
  if (header.status == Parse::kOk) header.status = reader.close();
  header.consumed = reader.pos;
  return header;
}

// Which of `tags` the text starts with: its index, -1 while one could still match, -2 if none.
int match_any(std::string_view text, std::span<const std::string_view> tags) {
  bool partial = false;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const TagMatch match = match_tag(text, tags[i]);
    if (match == TagMatch::kFull) return static_cast<int>(i);
    partial = partial || match == TagMatch::kPartial;
  }
  return partial ? -1 : -2;
}

}  // namespace

ToolCallIdGenerator random_tool_call_ids() {
  return [] {
    static constexpr std::string_view kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % kAlphabet.size()];
    return id;
  };
}

ToolCallIdGenerator counting_tool_call_ids(std::string prefix) {
  return
      [prefix = std::move(prefix), next = 0]() mutable { return prefix + std::to_string(next++); };
}

ToolCallStreamParser::ToolCallStreamParser(ToolParserOptions options)
    : options_(std::move(options)) {
  if (!options_.make_id) options_.make_id = random_tool_call_ids();
}

ToolStreamDelta ToolCallStreamParser::feed(std::string_view chunk) {
  out_ = {};
  buf_.append(chunk);
  while (step()) {
  }
  buf_.erase(0, pos_);  // once per feed: consuming from the front is O(1) until here
  pos_ = 0;
  return std::move(out_);
}

bool ToolCallStreamParser::step() {
  switch (state_) {
    case State::kContent:
      return step_content();
    case State::kBetweenInvokes:
      return step_between_invokes();
    case State::kInvokeHeader:
      return step_invoke_header();
    case State::kParams:
      return step_params();
    case State::kParamHeader:
      return step_param_header();
    case State::kValue:
      return step_value();
  }
  return false;
}

bool ToolCallStreamParser::step_content() {
  const MarkerHit hit = find_first_marker(pending(), kContentMarkers);
  if (hit.marker < 0) {
    const std::size_t n = utf8_complete_prefix(pending().substr(0, hit.pos));
    emit_content(pending().substr(0, n));
    consume(n);
    return false;
  }
  emit_content(pending().substr(0, hit.pos));
  const std::string_view marker = kContentMarkers[static_cast<std::size_t>(hit.marker)];
  consume(hit.pos + marker.size());
  if (hit.marker <= 3) {
    after_block_ = false;
    raw_.assign(marker);
    block_has_calls_ = false;
    implicit_block_ = hit.marker >= 2;
    if (implicit_block_) warn("<｜DSML｜invoke> without a <｜DSML｜tool_calls> block");
    state_ = implicit_block_ ? State::kInvokeHeader : State::kBetweenInvokes;
  } else {
    warn(fmt::format("stray {} in content dropped", marker));
  }
  return true;
}

bool ToolCallStreamParser::step_between_invokes() {
  static constexpr std::array<std::string_view, 3> kTags{dsv4::kInvokeOpen, dsv4::kToolCallsClose,
                                                         dsv4::kToolCallsOpen};
  std::size_t spaces = 0;
  while (spaces < pending().size() && is_ascii_space(pending()[spaces])) ++spaces;
  raw_.append(pending().substr(0, spaces));
  consume(spaces);
  if (pending().empty()) return false;
  const int tag = match_any(pending(), kTags);
  if (tag == -1) return false;
  if (tag == -2) {
    // Text after the last invoke: the block ends here. Expected for a call written without
    // the <｜DSML｜tool_calls> wrapper, a missing close tag otherwise.
    if (!block_has_calls_) {
      recover("malformed tool-call block; returned as content");
    } else {
      recover(implicit_block_ ? "" : "tool-call block not closed by </｜DSML｜tool_calls>");
    }
    return true;
  }
  const std::string_view matched = kTags[static_cast<std::size_t>(tag)];
  consume(matched.size());
  if (tag == 0) {
    raw_.append(matched);
    state_ = State::kInvokeHeader;
  } else if (tag == 1) {
    end_block();
    after_block_ = true;
  } else {
    raw_.append(matched);
    warn("repeated <｜DSML｜tool_calls> ignored");
  }
  return true;
}

// A malformed <｜DSML｜invoke> or <｜DSML｜parameter> tag: its text goes back to content.
bool ToolCallStreamParser::reject_header(std::size_t consumed, std::string_view tag) {
  raw_.append(pending().substr(0, consumed));
  consume(consumed);
  recover(std::string("malformed <｜DSML｜") + std::string(tag) + "> tag; returned as content");
  return true;
}

bool ToolCallStreamParser::step_invoke_header() {
  Header header = parse_invoke_header(pending());
  if (header.status == Parse::kNeedMore) return false;
  if (header.status == Parse::kBad) return reject_header(header.consumed, "invoke");
  consume(header.consumed);
  raw_.clear();
  announce_call(std::move(header.name));
  state_ = State::kParams;
  return true;
}

bool ToolCallStreamParser::step_params() {
  static constexpr std::array<std::string_view, 4> kTags{dsv4::kParamOpen, dsv4::kInvokeClose,
                                                         dsv4::kInvokeOpen, dsv4::kToolCallsClose};
  std::size_t spaces = 0;
  while (spaces < pending().size() && is_ascii_space(pending()[spaces])) ++spaces;
  raw_.append(pending().substr(0, spaces));
  consume(spaces);
  if (pending().empty()) return false;
  const int tag = match_any(pending(), kTags);
  if (tag == -1) return false;
  if (tag == -2) {
    recover("unexpected text inside <｜DSML｜invoke>; returned as content");
    return true;
  }
  const std::string_view matched = kTags[static_cast<std::size_t>(tag)];
  consume(matched.size());
  switch (tag) {
    case 0:
      raw_.append(matched);
      state_ = State::kParamHeader;
      break;
    case 1:
      close_call();
      raw_.clear();
      state_ = State::kBetweenInvokes;
      break;
    case 2:
      warn("missing </｜DSML｜invoke> before the next invoke");
      close_call();
      raw_.assign(matched);
      state_ = State::kInvokeHeader;
      break;
    default:
      warn("missing </｜DSML｜invoke> before </｜DSML｜tool_calls>");
      close_call();
      end_block();
      after_block_ = true;
      break;
  }
  return true;
}

bool ToolCallStreamParser::step_param_header() {
  Header header = parse_param_header(pending());
  if (header.status == Parse::kNeedMore) return false;
  if (header.status == Parse::kBad) return reject_header(header.consumed, "parameter");
  consume(header.consumed);
  raw_.clear();
  start_param(std::move(header.name), header.kind);
  state_ = State::kValue;
  return true;
}

// A value runs to </｜DSML｜parameter>. Text from a </｜DSML｜invoke> inside it is held back:
// it is value text if the parameter closes later, the end of the call if the output ends first.
bool ToolCallStreamParser::step_value() {
  if (!holding_) {
    const MarkerHit hit = find_first_marker(pending(), kValueEnds);
    if (hit.marker < 0) {
      std::size_t n = hit.pos;
      if (streaming_) n = utf8_complete_prefix(pending().substr(0, n));
      append_value(pending().substr(0, n));
      consume(n);
      return false;
    }
    append_value(pending().substr(0, hit.pos));
    if (hit.marker == 0) {
      consume(hit.pos + dsv4::kParamClose.size());
      finish_value(false);
      state_ = State::kParams;
    } else {
      holding_ = true;
      held_.assign(dsv4::kInvokeClose);
      consume(hit.pos + dsv4::kInvokeClose.size());
    }
    return true;
  }
  const MarkerHit hit = find_first_marker(pending(), kParamEnd);
  held_.append(pending().substr(0, hit.pos));
  if (hit.marker < 0) {
    consume(hit.pos);
    return false;
  }
  consume(hit.pos + dsv4::kParamClose.size());
  holding_ = false;
  append_value(held_);
  held_.clear();
  finish_value(false);
  state_ = State::kParams;
  return true;
}

std::string ToolCallStreamParser::key_prefix(const std::string& name) {
  keys_.push_back(name);
  std::string out = keys_.size() > 1 ? ", " : "";
  append_py_json_string(out, name);
  out += ": ";
  return out;
}

void ToolCallStreamParser::start_param(std::string name, DsmlValueKind kind) {
  param_ = std::move(name);
  kind_ = kind;
  value_.clear();
  held_.clear();
  holding_ = false;
  skip_ = std::find(keys_.begin(), keys_.end(), param_) != keys_.end();
  if (skip_) warn(fmt::format("duplicate parameter '{}' ignored", param_));
  const auto* schema = tool_ != nullptr ? property_schema(tool_->parameters, param_) : nullptr;
  streaming_ = !skip_ && kind == DsmlValueKind::kString && schema_allows_string(schema);
  if (streaming_) emit_arguments(key_prefix(param_) + "\"");
}

void ToolCallStreamParser::append_value(std::string_view text) {
  if (skip_ || text.empty()) return;
  if (!streaming_) {
    value_.append(text);
    return;
  }
  std::string escaped;
  append_py_json_escaped(escaped, text);
  emit_arguments(escaped);
}

void ToolCallStreamParser::finish_value(bool truncated) {
  if (streaming_) {
    emit_arguments("\"");
  } else if (!skip_ && truncated) {
    warn(fmt::format("parameter '{}' cut off; dropped", param_));
  } else if (!skip_) {
    const auto* schema = tool_ != nullptr ? property_schema(tool_->parameters, param_) : nullptr;
    std::string json = dsml_value_to_json(value_, kind_, schema, param_, warnings_);
    emit_arguments(key_prefix(param_) + json);
  }
  value_.clear();
  streaming_ = false;
  skip_ = false;
}

void ToolCallStreamParser::announce_call(std::string name) {
  tool_ = find_tool(options_.tools, name);
  if (tool_ == nullptr) warn(fmt::format("call of unknown tool '{}'", name));
  ToolCallDelta delta;
  delta.index = static_cast<int>(calls_.size());
  delta.id = options_.make_id();
  delta.name = name;
  calls_.push_back({delta.id, std::move(name), ""});
  out_.tool_calls.push_back(std::move(delta));
  call_open_ = true;
  block_has_calls_ = true;
  keys_.clear();
  emit_arguments("{");
}

void ToolCallStreamParser::close_call() {
  if (!call_open_) return;
  emit_arguments("}");
  call_open_ = false;
  tool_ = nullptr;
}

void ToolCallStreamParser::end_block() {
  raw_.clear();
  implicit_block_ = false;
  state_ = State::kContent;
}

void ToolCallStreamParser::recover(std::string_view why) {
  if (!why.empty()) warn(std::string(why));
  close_call();
  emit_content(raw_);
  end_block();
}

void ToolCallStreamParser::emit_content(std::string_view text) {
  // The encoder writes nothing between </｜DSML｜tool_calls> and EOS; text there is kept.
  if (after_block_ &&
      std::any_of(text.begin(), text.end(), [](char c) { return !is_ascii_space(c); })) {
    warn("text after the tool-call block kept as content");
    after_block_ = false;
  }
  out_.content.append(text);
}

void ToolCallStreamParser::emit_arguments(std::string_view fragment) {
  calls_.back().arguments.append(fragment);
  const int index = static_cast<int>(calls_.size()) - 1;
  if (out_.tool_calls.empty() || out_.tool_calls.back().index != index) {
    out_.tool_calls.push_back({index, "", "", ""});
  }
  out_.tool_calls.back().arguments.append(fragment);
}

void ToolCallStreamParser::warn(std::string message) { warnings_.push_back(std::move(message)); }

ToolStreamDelta ToolCallStreamParser::finish() {
  out_ = {};
  while (step()) {
  }
  while (true) {
    if (state_ == State::kValue && holding_) {
      // The value never closed: it ends before the held </｜DSML｜invoke>, which is parsed
      // again as markup together with everything after it.
      warn(fmt::format("parameter '{}' not closed; ended at </｜DSML｜invoke>", param_));
      std::string rest = held_ + std::string(pending());
      held_.clear();
      holding_ = false;
      finish_value(false);
      state_ = State::kParams;
      buf_ = std::move(rest);
      pos_ = 0;
      while (step()) {
      }
      continue;
    }
    break;
  }
  switch (state_) {
    case State::kContent:
      emit_content(pending());
      break;
    case State::kBetweenInvokes:
    case State::kInvokeHeader:
      if (!block_has_calls_) {
        warn("unterminated tool-call markup returned as content");
        emit_content(raw_ + std::string(pending()));
      } else if (!(implicit_block_ && state_ == State::kBetweenInvokes)) {
        warn("tool-call block cut off; incomplete markup dropped");
      }
      break;
    case State::kParams:
    case State::kParamHeader:
      warn("tool call cut off before </｜DSML｜invoke>");
      close_call();
      break;
    case State::kValue:
      // What is left is a partial closing tag (dropped) or an incomplete UTF-8 sequence (kept).
      if (!pending().empty() && pending()[0] != '<') append_value(pending());
      warn(fmt::format("tool call cut off inside parameter '{}'", param_));
      finish_value(true);
      close_call();
      break;
  }
  buf_.clear();
  pos_ = 0;
  end_block();
  return std::move(out_);
}

ToolCallParseResult parse_tool_calls(std::string_view text, ToolParserOptions options) {
  ToolCallStreamParser parser(std::move(options));
  ToolCallParseResult result;
  result.content = parser.feed(text).content;
  result.content += parser.finish().content;
  result.calls = parser.calls();
  result.warnings = parser.warnings();
  return result;
}

}  // namespace flint
