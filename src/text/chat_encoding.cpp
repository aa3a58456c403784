#include "text/chat_encoding.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "text/chat_markers.h"
#include "text/py_json.h"

namespace flint {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

// The tools section, split around the one place that varies (the schemas, one JSON per line).
constexpr std::string_view kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
    "calls.\n";

constexpr std::string_view kResponseFormatHead =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

std::string_view task_token(std::string_view task) {
  if (task == "action") return "<｜action｜>";
  if (task == "query") return "<｜query｜>";
  if (task == "authority") return "<｜authority｜>";
  if (task == "domain") return "<｜domain｜>";
  if (task == "title") return "<｜title｜>";
  if (task == "read_url") return "<｜read_url｜>";
  throw Error("unknown task '{}'", task);  // parse_chat_messages already rejects these
}

// A user turn after merging is a list of blocks joined by "\n\n".
struct Block {
  bool tool_result = false;
  std::string_view text;  // the text, or the tool result's content
  std::string_view tool_use_id;
};

// One message as the encoder's render step sees it, after tool messages are merged into user
// turns (merge_tool_messages) and reasoning is possibly dropped (_drop_thinking_messages).
struct Turn {
  ChatRole role = ChatRole::kUser;
  const ChatMessage* message = nullptr;  // null for a user turn that began with a tool result
  std::vector<Block> blocks;             // user turns only; never empty
  std::optional<std::string_view> task;
  bool wo_eos = false;
  bool reasoning_dropped = false;
};

std::string_view text_or_empty(const std::optional<std::string>& text) {
  return text ? std::string_view(*text) : std::string_view();
}

// Appends client text (a message, a schema, an argument) and records where it went, so that
// special-token strings inside it can be kept as text when the prompt is tokenized.
void append_client(std::string& out, std::string_view text, ClientSpans* spans) {
  if (spans != nullptr && !text.empty()) spans->push_back({out.size(), out.size() + text.size()});
  out += text;
}
void append_client_json(std::string& out, const Json& value, ClientSpans* spans) {
  const std::size_t begin = out.size();
  append_py_json(out, value);
  if (spans != nullptr) spans->push_back({begin, out.size()});
}

std::vector<Turn> merge_tool_messages(std::span<const ChatMessage* const> messages) {
  std::vector<Turn> merged;
  for (const ChatMessage* message : messages) {
    const bool last_is_user = !merged.empty() && merged.back().role == ChatRole::kUser;
    if (message->role == ChatRole::kTool) {
      Block block{true, text_or_empty(message->content), message->tool_call_id};
      if (last_is_user) {
        merged.back().blocks.push_back(block);
      } else {
        Turn turn;
        turn.blocks.push_back(block);
        merged.push_back(std::move(turn));
      }
    } else if (message->role == ChatRole::kUser) {
      Block block{false, text_or_empty(message->content), {}};
      if (last_is_user && !merged.back().task) {
        merged.back().blocks.push_back(block);
      } else {
        Turn turn;
        turn.message = message;
        turn.blocks.push_back(block);
        if (message->task) turn.task = *message->task;
        turn.wo_eos = message->wo_eos;
        merged.push_back(std::move(turn));
      }
    } else {
      Turn turn;
      turn.role = message->role;
      turn.message = message;
      if (message->task) turn.task = *message->task;
      turn.wo_eos = message->wo_eos;
      merged.push_back(std::move(turn));
    }
  }
  return merged;
}

using CallOrder = std::unordered_map<std::string_view, int>;

// An assistant message with tool calls resets the order that later tool results are sorted by.
void update_call_order(const ChatMessage& message, CallOrder& order) {
  if (message.role != ChatRole::kAssistant || message.tool_calls.empty()) return;
  order.clear();
  for (std::size_t i = 0; i < message.tool_calls.size(); ++i) {
    const auto& id = message.tool_calls[i].id;
    if (!id.empty()) order[id] = static_cast<int>(i);
  }
}

// sort_tool_results_by_call_order: a stable sort of each user turn's tool-result blocks (text
// blocks keep their places), by the position of their call in the latest assistant turn.
void sort_tool_results(std::vector<Turn>& turns, CallOrder order) {
  for (Turn& turn : turns) {
    if (turn.message != nullptr && turn.role == ChatRole::kAssistant) {
      update_call_order(*turn.message, order);
      continue;
    }
    if (turn.role != ChatRole::kUser || order.empty()) continue;
    std::vector<Block> results;
    for (const Block& block : turn.blocks) {
      if (block.tool_result) results.push_back(block);
    }
    if (results.size() < 2) continue;
    auto rank = [&](const Block& block) {
      auto it = order.find(block.tool_use_id);
      return it == order.end() ? 0 : it->second;
    };
    std::stable_sort(results.begin(), results.end(),
                     [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
    std::size_t next = 0;
    for (Block& block : turn.blocks) {
      if (block.tool_result) block = results[next++];
    }
  }
}

std::ptrdiff_t last_user_index(const std::vector<Turn>& turns) {
  for (std::size_t i = turns.size(); i-- > 0;) {
    if (turns[i].role == ChatRole::kUser || turns[i].role == ChatRole::kDeveloper) {
      return static_cast<std::ptrdiff_t>(i);
    }
  }
  return -1;
}

// _drop_thinking_messages: before the last user turn, assistants lose their reasoning and
// developer turns disappear.
std::vector<Turn> drop_thinking(const std::vector<Turn>& turns) {
  const std::ptrdiff_t last_user = last_user_index(turns);
  std::vector<Turn> result;
  for (std::size_t i = 0; i < turns.size(); ++i) {
    const Turn& turn = turns[i];
    const bool keep_role = turn.role == ChatRole::kUser || turn.role == ChatRole::kSystem ||
                           turn.role == ChatRole::kLatestReminder;
    if (keep_role || static_cast<std::ptrdiff_t>(i) >= last_user) {
      result.push_back(turn);
    } else if (turn.role == ChatRole::kAssistant) {
      result.push_back(turn);
      result.back().reasoning_dropped = true;
    }
  }
  return result;
}

void append_tools_section(std::string& out, std::span<const ToolDefinition* const> tools,
                          ClientSpans* spans) {
  out += kToolsHead;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    if (i > 0) out += '\n';
    append_client_json(out, tools[i]->function, spans);
  }
  out += kToolsTail;
}

void append_dsml_arguments(std::string& out, const std::string& arguments, ClientSpans* spans);

void append_tool_calls(std::string& out, std::span<const ChatToolCall> calls,
                       ClientSpans* spans) {
  out += "\n\n";
  out += dsv4::kToolCallsOpen;
  out += '\n';
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) out += '\n';
    out += dsv4::kInvokeOpen;
    out += " name=\"";
    append_client(out, calls[i].name, spans);
    out += "\">\n";
    append_dsml_arguments(out, calls[i].arguments, spans);
    out += '\n';
    out += dsv4::kInvokeClose;
  }
  out += '\n';
  out += dsv4::kToolCallsClose;
}

void append_tools_and_format(std::string& out, const ChatMessage& message, ClientSpans* spans) {
  if (!message.tools.empty()) {
    std::vector<const ToolDefinition*> tools;
    for (const auto& tool : message.tools) tools.push_back(&tool);
    out += "\n\n";
    append_tools_section(out, tools, spans);
  }
  // Python tests the dict's truth: an empty object (or null) writes nothing.
  const auto& format = message.response_format;
  if (format && !format->is_null() && !(format->is_object() && format->empty())) {
    out += "\n\n";
    out += kResponseFormatHead;
    append_client_json(out, *format, spans);
  }
}

struct RenderContext {
  const std::vector<Turn>& turns;
  bool thinking;
  bool drop_thinking;
  ReasoningEffort effort;
  std::ptrdiff_t last_user;
  ClientSpans* spans;  // null: not recorded
};

void render_assistant(std::string& out, const RenderContext& ctx, std::size_t index) {
  const Turn& turn = ctx.turns[index];
  const ChatMessage& message = *turn.message;
  const bool previous_has_task = index > 0 && ctx.turns[index - 1].task.has_value();
  if (ctx.thinking && !previous_has_task &&
      (!ctx.drop_thinking || static_cast<std::ptrdiff_t>(index) > ctx.last_user)) {
    if (!turn.reasoning_dropped) append_client(out, text_or_empty(message.reasoning_content), ctx.spans);
    out += dsv4::kThinkEnd;
  }
  append_client(out, text_or_empty(message.content), ctx.spans);
  if (!message.tool_calls.empty()) append_tool_calls(out, message.tool_calls, ctx.spans);
  if (!turn.wo_eos) out += dsv4::kEos;
}

void render_turn(std::string& out, const RenderContext& ctx, std::size_t index) {
  const Turn& turn = ctx.turns[index];
  if (index == 0 && ctx.thinking && ctx.effort == ReasoningEffort::kMax) {
    out += kReasoningEffortMax;
  }
  switch (turn.role) {
    case ChatRole::kSystem:
      append_client(out, text_or_empty(turn.message->content), ctx.spans);
      append_tools_and_format(out, *turn.message, ctx.spans);
      break;
    case ChatRole::kDeveloper:
      out += dsv4::kUser;
      append_client(out, text_or_empty(turn.message->content), ctx.spans);
      append_tools_and_format(out, *turn.message, ctx.spans);
      break;
    case ChatRole::kUser:
      out += dsv4::kUser;
      for (std::size_t i = 0; i < turn.blocks.size(); ++i) {
        if (i > 0) out += "\n\n";
        const Block& block = turn.blocks[i];
        if (block.tool_result) out += dsv4::kToolResultOpen;
        append_client(out, block.text, ctx.spans);
        if (block.tool_result) out += dsv4::kToolResultClose;
      }
      break;
    case ChatRole::kLatestReminder:
      out += dsv4::kLatestReminder;
      append_client(out, text_or_empty(turn.message->content), ctx.spans);
      break;
    case ChatRole::kAssistant:
      render_assistant(out, ctx, index);
      break;
    case ChatRole::kTool:
      throw Error("internal: tool message left after merging");
  }

  // What follows the turn: nothing when the next turn is not an assistant or reminder; else a
  // task token, or the assistant tag with the thinking switch after a user/developer turn.
  if (index + 1 < ctx.turns.size()) {
    const ChatRole next = ctx.turns[index + 1].role;
    if (next != ChatRole::kAssistant && next != ChatRole::kLatestReminder) return;
  }
  if (turn.task) {
    if (*turn.task != "action") {
      out += task_token(*turn.task);
    } else {
      out += dsv4::kAssistant;
      out += ctx.thinking ? dsv4::kThinkStart : dsv4::kThinkEnd;
      out += task_token(*turn.task);
    }
  } else if (turn.role == ChatRole::kUser || turn.role == ChatRole::kDeveloper) {
    out += dsv4::kAssistant;
    const bool open_thinking =
        ctx.thinking && (!ctx.drop_thinking || static_cast<std::ptrdiff_t>(index) >= ctx.last_user);
    out += open_thinking ? dsv4::kThinkStart : dsv4::kThinkEnd;
  }
}

void append_dsml_arguments(std::string& out, const std::string& arguments, ClientSpans* spans) {
  // The encoder json.loads the arguments and writes one parameter per top-level key: strings
  // as is (string="true"), anything else as JSON. Arguments that are not a JSON object become
  // a single string parameter named "arguments" (the encoder does this for invalid JSON and
  // crashes on valid non-objects; see docs/chat.md).
  Json parsed = parse_json_text(arguments);
  if (parsed.is_discarded() || !parsed.is_object())
    parsed = Json::object({{"arguments", arguments}});
  bool first = true;
  for (auto it = parsed.begin(); it != parsed.end(); ++it) {
    if (!first) out += '\n';
    first = false;
    const bool is_string = it.value().is_string();
    out += dsv4::kParamOpen;
    out += " name=\"";
    append_client(out, it.key(), spans);
    out += is_string ? "\" string=\"true\">" : "\" string=\"false\">";
    if (is_string) {
      append_client(out, it.value().get_ref<const std::string&>(), spans);
    } else {
      append_client_json(out, it.value(), spans);
    }
    out += dsv4::kParamClose;
  }
}

std::string encode_pointers(std::span<const ChatMessage* const> messages,
                            const ChatEncodeOptions& options, ClientSpans* spans) {
  const std::size_t context_count = std::min(options.context_messages, messages.size());
  const auto raw_context = messages.first(context_count);
  const auto raw_rest = messages.subspan(context_count);

  // As encode_messages: the new messages are merged on their own and sorted with the raw
  // context in front (only its assistant tool calls matter there); the context is merged and
  // sorted separately.
  std::vector<Turn> rest = merge_tool_messages(raw_rest);
  CallOrder order;
  for (const ChatMessage* message : raw_context) update_call_order(*message, order);
  sort_tool_results(rest, order);
  std::vector<Turn> context = merge_tool_messages(raw_context);
  sort_tool_results(context, {});

  std::vector<Turn> full = context;
  full.insert(full.end(), rest.begin(), rest.end());

  std::string prompt;
  if (options.add_bos && context.empty()) prompt += dsv4::kBos;

  bool any_tools = false;
  for (const ChatMessage* message : messages) any_tools = any_tools || !message->tools.empty();
  const bool drop = options.drop_thinking && !any_tools;
  const bool thinking = options.thinking_mode == ThinkingMode::kThinking;

  std::size_t render_count = rest.size();
  std::size_t context_len = context.size();
  if (thinking && drop) {
    full = drop_thinking(full);
    // The encoder's arithmetic, kept as is: it counts the context after dropping on its own.
    const std::size_t context_kept = drop_thinking(context).size();
    render_count = full.size() >= context_kept ? full.size() - context_kept : 0;
    context_len = full.size() - render_count;
  }

  const RenderContext ctx{full,      thinking, drop, options.reasoning_effort, last_user_index(full),
                          spans};
  for (std::size_t i = 0; i < render_count; ++i) render_turn(prompt, ctx, i + context_len);
  return prompt;
}

}  // namespace

std::string render_tools_section(std::span<const ToolDefinition* const> tools) {
  std::string out;
  append_tools_section(out, tools, nullptr);
  return out;
}

std::string render_tool_calls(std::span<const ChatToolCall> calls) {
  std::string out;
  append_tool_calls(out, calls, nullptr);
  return out;
}

std::string encode_messages(std::span<const ChatMessage> messages,
                            const ChatEncodeOptions& options, ClientSpans* client_text) {
  std::vector<const ChatMessage*> pointers;
  pointers.reserve(messages.size());
  for (const auto& message : messages) pointers.push_back(&message);
  return encode_pointers(pointers, options, client_text);
}

std::string encode_chat(const ChatRequest& request, const ChatEncodeOptions& options,
                        ClientSpans* client_text) {
  const auto& messages = request.messages;
  const bool attach = !request.tools.empty() && request.tool_choice.mode != ToolChoiceMode::kNone;
  const bool has_head = !messages.empty() && (messages[0].role == ChatRole::kSystem ||
                                              messages[0].role == ChatRole::kDeveloper);
  ChatMessage head;  // lives until encoding ends: the first pointer may point here
  std::vector<const ChatMessage*> pointers;
  pointers.reserve(messages.size() + 1);
  if (attach) {
    if (has_head) head = messages[0];
    head.role = has_head ? messages[0].role : ChatRole::kSystem;
    head.tools = request.tools;
    pointers.push_back(&head);
  }
  for (std::size_t i = attach && has_head ? 1 : 0; i < messages.size(); ++i) {
    pointers.push_back(&messages[i]);
  }
  return encode_pointers(pointers, options, client_text);
}

ChatEncodeOptions resolve_encode_options(const ChatRequest& request, bool default_thinking) {
  ChatEncodeOptions options;
  bool thinking = request.thinking.value_or(default_thinking);
  if (request.reasoning_effort) {
    const std::string& effort = *request.reasoning_effort;
    if (effort == "none") {
      thinking = false;
    } else if (effort == "minimal" || effort == "low" || effort == "medium" || effort == "high") {
      options.reasoning_effort = ReasoningEffort::kHigh;
    } else if (effort == "xhigh" || effort == "max") {
      options.reasoning_effort = ReasoningEffort::kMax;
    } else {
      throw Error(
          "reasoning_effort: unknown value '{}' (valid: none, minimal, low, medium, high, xhigh, "
          "max)",
          effort);
    }
  } else if (thinking) {
    options.reasoning_effort = ReasoningEffort::kHigh;
  }
  options.thinking_mode = thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
  options.drop_thinking = request.drop_thinking.value_or(true);
  return options;
}

}  // namespace flint
