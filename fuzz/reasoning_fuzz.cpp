// libFuzzer target for the reasoning parser and the combined completion parser
// (text/reasoning_parser.h, text/completion_parser.h).
//
// The input is parsed whole and cut into chunks at positions derived from its first byte, in
// both start modes; the results must be identical, and the reasoning parser may only drop
// markers, never add text. Any difference aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "text/completion_parser.h"
#include "text/reasoning_parser.h"

namespace {

using flint::ReasoningParser;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "reasoning_fuzz: %s\n", what);
    std::abort();
  }
}

struct Outcome {
  std::string reasoning;
  std::string content;
  std::vector<std::string> calls;  // "id|name|arguments" of every call, assembled from deltas
  std::vector<std::string> warnings;
  bool operator==(const Outcome&) const = default;
};

std::vector<std::string_view> chunks(std::string_view text, const std::vector<std::size_t>& sizes) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  for (std::size_t i = 0; pos < text.size(); ++i) {
    const std::size_t n = sizes.empty() ? text.size() : sizes[i % sizes.size()];
    out.push_back(text.substr(pos, n));
    pos += n;
  }
  return out;
}

Outcome run_reasoning(std::string_view text, const std::vector<std::size_t>& sizes,
                      ReasoningParser::Start start) {
  ReasoningParser parser(start);
  Outcome out;
  for (auto piece : chunks(text, sizes)) {
    auto d = parser.feed(piece);
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  auto d = parser.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  out.warnings = parser.warnings();
  check(out.reasoning.size() + out.content.size() <= text.size(), "reasoning parser added text");
  return out;
}

Outcome run_completion(std::string_view text, const std::vector<std::size_t>& sizes,
                       ReasoningParser::Start start) {
  flint::CompletionParser parser({start, true, {{}, flint::counting_tool_call_ids()}});
  Outcome out;
  auto add = [&](const flint::CompletionDelta& d) {
    out.reasoning += d.reasoning;
    out.content += d.content;
    for (const auto& call : d.tool_calls) {
      if (call.index == static_cast<int>(out.calls.size()))
        out.calls.push_back(call.id + "|" + call.name + "|");
      check(call.index >= 0 && call.index < static_cast<int>(out.calls.size()), "bad delta index");
      out.calls[static_cast<std::size_t>(call.index)] += call.arguments;
    }
  };
  for (auto piece : chunks(text, sizes)) add(parser.feed(piece));
  add(parser.finish());
  const flint::ParsedCompletion result = parser.result();
  check(result.reasoning_content == out.reasoning && result.content == out.content,
        "completion result differs from its deltas");
  out.warnings = result.warnings;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint32_t state = data[0] * 2246822519u + 7;
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 16; ++i) {
    state = state * 1664525u + 1013904223u;
    sizes.push_back(1 + (state >> 16) % (data[0] % 4 == 0 ? 3 : 20));
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (auto start : {ReasoningParser::Start::kReasoning, ReasoningParser::Start::kContent}) {
    check(run_reasoning(text, {}, start) == run_reasoning(text, sizes, start),
          "reasoning parser: chunked result differs from whole");
    check(run_completion(text, {}, start) == run_completion(text, sizes, start),
          "completion parser: chunked result differs from whole");
  }
  return 0;
}
