// DeepSeek-V4 chat encoding: messages -> prompt text, byte for byte what DeepSeek's reference
// encoder (encoding_dsv4.py, encode_messages) produces. DeepSeek-V4 ships that Python encoder
// instead of a Jinja chat template; this is a native port of its behaviour (docs/chat.md lists
// the few places where we deliberately differ: inputs on which the Python code crashes or writes
// Python's "None").
//
// Outline of the format:
//   BOS [max-effort prefix] system [\n\n## Tools ...] <｜User｜>text<｜Assistant｜><think>
//   reasoning</think>content[\n\n<｜DSML｜tool_calls>...]<｜end▁of▁sentence｜><｜User｜>...
// - thinking mode opens <think> after the last <｜Assistant｜>; chat mode writes </think> there;
// - earlier turns' reasoning is dropped (drop_thinking) unless some message declares tools;
// - tool messages are merged into the following user turn as <tool_result> blocks, sorted into
//   the order of the assistant's tool calls;
// - assistant tool calls are re-rendered in DSML from their JSON arguments.
//
// The prompt is plain text: special tokens appear as their literal strings, and the tokenizer
// must map them to their ids (the prompt is tokenized without adding BOS again).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "text/chat_types.h"
#include "text/text_span.h"

namespace flint {

enum class ThinkingMode { kChat, kThinking };

// Where client text (contents, reasoning, tool schemas, call names and arguments) sits in an
// encoded prompt: sorted, disjoint byte ranges, for Tokenizer::encode_with_literals, so that a
// special-token string a user typed stays text. Everything else is the encoder's markup.
using ClientSpans = std::vector<text::TextSpan>;

// The encoder's reasoning_effort: None, "high" (no visible effect on the prompt) or "max"
// (prepends a fixed "Reasoning Effort: Absolute maximum ..." paragraph in thinking mode).
enum class ReasoningEffort { kUnset, kHigh, kMax };

struct ChatEncodeOptions {
  ThinkingMode thinking_mode = ThinkingMode::kThinking;
  ReasoningEffort reasoning_effort = ReasoningEffort::kUnset;
  bool drop_thinking = true;  // ignored (as false) when any message declares tools
  bool add_bos = true;
  // The encoder's `context`: the first `context_messages` messages were encoded by an earlier
  // call; render only the rest (and no BOS). 0 encodes the whole conversation.
  std::size_t context_messages = 0;
};

// The encoder's encode_messages(): messages carry their own `tools` (on a system or developer
// message). Throws flint::Error for a message list the format cannot express.
std::string encode_messages(std::span<const ChatMessage> messages,
                            const ChatEncodeOptions& options, ClientSpans* client_text = nullptr);

// An OpenAI request: request-level tools are attached to a leading system/developer message
// (replacing tools declared there) or, without one, to a new empty system message in front, as
// vLLM does; tool_choice "none" leaves them out of the prompt (as DeepSeek's API does).
std::string encode_chat(const ChatRequest& request, const ChatEncodeOptions& options,
                        ClientSpans* client_text = nullptr);

// Options from the request: thinking (chat_template_kwargs.thinking / enable_thinking, or
// `thinking: {"type": ...}`; `default_thinking` when absent) and reasoning_effort: "none" selects
// chat mode, "minimal"/"low"/"medium"/"high" map to high, "xhigh"/"max" to max. Throws
// flint::Error naming reasoning_effort for any other value.
ChatEncodeOptions resolve_encode_options(const ChatRequest& request, bool default_thinking = true);

// The "## Tools" section the encoder writes for a tool list (exposed for tests and docs).
std::string render_tools_section(std::span<const ToolDefinition* const> tools);

// The DSML block for assistant tool calls, starting with "\n\n<｜DSML｜tool_calls>" (exposed so
// that tests can check that parsing this text returns the same calls).
std::string render_tool_calls(std::span<const ChatToolCall> calls);

}  // namespace flint
