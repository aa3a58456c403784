#include "server/chat_prompt.h"

#include "server/api_error.h"
#include "text/chat_encoding.h"
#include "text/chat_markers.h"
#include "text/reasoning_parser.h"

namespace flint::server {

namespace {

// The request's thinking switches, with the server's --default-chat-template-kwargs under them.
ChatRequest with_defaults(const ApiContext& ctx, const ChatRequest& in) {
  ChatRequest chat = in;
  const auto& kwargs = ctx.config().default_chat_template_kwargs;
  for (const char* key : {"thinking", "enable_thinking"}) {
    if (!chat.thinking && kwargs.contains(key) && kwargs[key].is_boolean()) {
      chat.thinking = kwargs[key].get<bool>();
    }
  }
  if (!chat.reasoning_effort && kwargs.contains("reasoning_effort") &&
      kwargs["reasoning_effort"].is_string()) {
    chat.reasoning_effort = kwargs["reasoning_effort"].get<std::string>();
  }
  if (!chat.drop_thinking && kwargs.contains("drop_thinking") &&
      kwargs["drop_thinking"].is_boolean()) {
    chat.drop_thinking = kwargs["drop_thinking"].get<bool>();
  }
  return chat;
}

void check_tool_choice(const ApiContext& ctx, const ChatRequest& chat) {
  const ToolChoice& choice = chat.tool_choice;
  if (choice.mode == ToolChoiceMode::kRequired || choice.mode == ToolChoiceMode::kNamed) {
    if (chat.tools.empty()) {
      throw ApiError(400, "tool_choice", "tool_choice: '{}' needs `tools`, and none were given",
                     choice.mode == ToolChoiceMode::kRequired ? "required" : choice.name);
    }
    if (choice.mode == ToolChoiceMode::kNamed && find_tool(chat.tools, choice.name) == nullptr) {
      throw ApiError(400, "tool_choice", "tool_choice: the function '{}' is not among `tools`",
                     choice.name);
    }
  }
  if (choice.mode == ToolChoiceMode::kAuto && !chat.tools.empty() &&
      !(ctx.config().enable_auto_tool_choice && ctx.config().tool_call_parser)) {
    throw ApiError(400, "tool_choice",
                   "\"auto\" tool choice requires --enable-auto-tool-choice and "
                   "--tool-call-parser deepseek_v4 to be set on the server");
  }
}

struct Encoded {
  std::string text;
  ClientSpans spans;
  bool thinking = false;
};

Encoded encode(const ChatRequest& chat) {
  Encoded e;
  try {
    const ChatEncodeOptions options = resolve_encode_options(chat, /*default_thinking=*/true);
    e.thinking = options.thinking_mode == ThinkingMode::kThinking;
    e.text = encode_chat(chat, options, &e.spans);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& err) {
    throw bad_request(err);
  }
  return e;
}

// The DSML opening of a call that tool_choice forces, and where its client part (the name) is.
std::string forced_opening(const ToolChoice& choice, ClientSpans* spans, std::size_t offset) {
  std::string text(dsv4::kToolCallsOpenWithBreak);
  text += '\n';
  text += dsv4::kInvokeOpen;
  text += " name=\"";
  if (choice.mode == ToolChoiceMode::kNamed) {
    spans->push_back({offset + text.size(), offset + text.size() + choice.name.size()});
    text += choice.name;
    text += "\">\n";
  }
  return text;
}

}  // namespace

ChatRequest parse_openai_chat(const Json& body) {
  try {
    return parse_chat_request(body);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw bad_request(e);
  }
}

ChatPromptText render_chat_prompt(const ApiContext& ctx, const ChatRequest& request) {
  const ChatRequest chat = with_defaults(ctx, request);
  Encoded e = encode(chat);
  ChatPromptText out;
  ctx.tokenizer().encode_with_literals(e.text, e.spans, out.ids);
  out.text = std::move(e.text);
  return out;
}

void prepare_chat(const ApiContext& ctx, const ChatRequest& request, GenerationSpec& spec) {
  const ChatRequest chat = with_defaults(ctx, request);
  check_tool_choice(ctx, chat);
  Encoded e = encode(chat);
  const ToolChoice& choice = chat.tool_choice;
  const bool force = choice.mode == ToolChoiceMode::kRequired ||
                     choice.mode == ToolChoiceMode::kNamed;
  spec.parse_chat = true;
  spec.reasoning_start = ReasoningParser::start_for_prompt(e.text);
  spec.tools = chat.tools;
  spec.deliver_tool_calls = choice.mode != ToolChoiceMode::kNone;
  if (force && !e.thinking) {
    // Chat mode: the answer starts with the call, so the prompt ends with its opening.
    const std::string opening = forced_opening(choice, &e.spans, e.text.size());
    e.text += opening;
    spec.parser_prefix = opening;
  } else if (force) {
    // Thinking mode: the model reasons first; the engine forces the opening after </think>.
    ClientSpans spans;
    const std::string opening = forced_opening(choice, &spans, 0);
    ForcedTokens forced;
    forced.after = ctx.tokenizer().token_id(dsv4::kThinkEnd);
    ctx.tokenizer().encode_with_literals(opening, spans, forced.tokens);
    if (*forced.after == text::Tokenizer::kNoToken) {
      throw ApiError(500, "", "the tokenizer has no </think> token");
    }
    spec.request.sampling.forced = std::move(forced);
  }
  spec.request.prompt.clear();
  ctx.tokenizer().encode_with_literals(e.text, e.spans, spec.request.prompt);
}

}  // namespace flint::server
