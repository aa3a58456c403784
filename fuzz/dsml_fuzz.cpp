// libFuzzer target for the DSML tool-call parser (text/dsml_parser.h).
//
// The input is parsed twice: whole, and cut into chunks at positions derived from the input's
// first byte. Both runs must agree exactly (content, calls, warnings), every call's arguments
// must be a JSON object, and the streamed argument fragments must add up to the final text.
// Any difference aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/chat_types.h"
#include "text/dsml_parser.h"

namespace {

using flint::ParsedToolCall;
using flint::ToolCallStreamParser;
using flint::ToolDefinition;

const std::vector<ToolDefinition>& tools() {
  static const std::vector<ToolDefinition> defs = flint::parse_tools(nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
          "n": {"type": ["number", "null"]}, "b": {"type": "boolean"},
          "a": {"type": "array", "items": {"type": "integer"}},
          "o": {"type": "object", "properties": {"k": {"type": "boolean"}}},
          "u": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}])"));
  return defs;
}

struct Outcome {
  std::string content;
  std::vector<ParsedToolCall> calls;  // assembled from deltas
  std::vector<std::string> warnings;
};

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "dsml_fuzz: %s\n", what);
    std::abort();
  }
}

void apply(const flint::ToolStreamDelta& delta, Outcome& out) {
  out.content += delta.content;
  for (const auto& d : delta.tool_calls) {
    if (d.index == static_cast<int>(out.calls.size())) {
      check(!d.id.empty() && !d.name.empty(), "first delta lacks id or name");
      out.calls.push_back({d.id, d.name, ""});
    }
    check(d.index >= 0 && d.index < static_cast<int>(out.calls.size()), "delta index out of range");
    out.calls[static_cast<std::size_t>(d.index)].arguments += d.arguments;
  }
}

Outcome run(std::string_view text, const std::vector<std::size_t>& sizes) {
  ToolCallStreamParser parser({tools(), flint::counting_tool_call_ids()});
  Outcome out;
  std::size_t pos = 0;
  for (std::size_t i = 0; pos < text.size(); ++i) {
    const std::size_t n = sizes.empty() ? text.size() : sizes[i % sizes.size()];
    apply(parser.feed(text.substr(pos, n)), out);
    pos += n;
  }
  apply(parser.finish(), out);
  out.warnings = parser.warnings();
  check(out.calls == parser.calls(), "deltas do not add up to the calls");
  for (const auto& call : out.calls) {
    // (nlohmann stops at a NUL byte, so rule those out first.)
    check(call.arguments.find('\0') == std::string::npos, "NUL byte in arguments");
    check(nlohmann::json::accept(call.arguments), "arguments are not JSON");
    check(!call.arguments.empty() && call.arguments.front() == '{', "arguments not an object");
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk sizes; the rest is the generated text.
  uint32_t state = data[0] * 2654435761u + 1;
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 16; ++i) {
    state = state * 1103515245u + 12345u;
    sizes.push_back(1 + (state >> 16) % (data[0] % 4 == 0 ? 3 : 24));
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = run(text, {});
  const Outcome pieces = run(text, sizes);
  check(whole.content == pieces.content, "content differs between whole and chunked");
  check(whole.calls == pieces.calls, "calls differ between whole and chunked");
  check(whole.warnings == pieces.warnings, "warnings differ between whole and chunked");
  return 0;
}
