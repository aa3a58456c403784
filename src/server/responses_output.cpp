#include "server/responses_output.h"

#include <utility>

namespace flint::server {
namespace {

std::string_view id_prefix(OutputItem::Kind kind) {
  switch (kind) {
    case OutputItem::Kind::kReasoning:
      return "rs_";
    case OutputItem::Kind::kMessage:
      return "msg_";
    case OutputItem::Kind::kFunctionCall:
      return "fc_";
  }
  return "item_";
}

Json reasoning_part(const std::string& text) {
  return Json{{"type", "reasoning_text"}, {"text", text}};
}

Json text_part(const std::string& text) {
  return Json{{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
}

OutputItem make_item(OutputItem::Kind kind, const ItemIdGenerator& ids) {
  OutputItem item;
  item.kind = kind;
  item.id = ids(id_prefix(kind));
  return item;
}

}  // namespace

std::string_view response_status_name(ResponseStatus status) {
  switch (status) {
    case ResponseStatus::kInProgress:
      return "in_progress";
    case ResponseStatus::kCompleted:
      return "completed";
    case ResponseStatus::kIncomplete:
      return "incomplete";
    case ResponseStatus::kFailed:
      return "failed";
  }
  return "failed";
}

Json response_item_json(const OutputItem& item) {
  // A fresh item (output_item.added) has no parts yet.
  const bool fresh = item.status == "in_progress" && item.text.empty();
  switch (item.kind) {
    case OutputItem::Kind::kReasoning: {
      Json content = Json::array();
      if (!fresh) content.push_back(reasoning_part(item.text));
      return Json{{"id", item.id},
                  {"type", "reasoning"},
                  {"summary", Json::array()},
                  {"content", std::move(content)},
                  {"status", item.status}};
    }
    case OutputItem::Kind::kMessage: {
      Json content = Json::array();
      if (!fresh) content.push_back(text_part(item.text));
      return Json{{"id", item.id},
                  {"type", "message"},
                  {"status", item.status},
                  {"content", std::move(content)},
                  {"role", "assistant"}};
    }
    case OutputItem::Kind::kFunctionCall:
      return Json{{"id", item.id},           {"type", "function_call"},
                  {"status", item.status},   {"arguments", item.arguments},
                  {"call_id", item.call_id}, {"name", item.name}};
  }
  return Json::object();
}

Json responses_usage_json(const engine::Usage& usage, int64_t reasoning_tokens) {
  return Json{{"input_tokens", usage.prompt_tokens},
              {"input_tokens_details", Json{{"cached_tokens", usage.cached_prompt_tokens}}},
              {"output_tokens", usage.completion_tokens},
              {"output_tokens_details", Json{{"reasoning_tokens", reasoning_tokens}}},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

Json response_json(const ResponseSettings& s, ResponseStatus status,
                   const std::vector<OutputItem>& items, const Json& usage,
                   std::string_view error) {
  Json output = Json::array();
  for (const OutputItem& item : items) output.push_back(response_item_json(item));
  Json error_json = nullptr;
  if (status == ResponseStatus::kFailed) {
    error_json = Json{{"code", "server_error"},
                      {"message", error.empty() ? "the engine failed the request" : error}};
  }
  Json incomplete = nullptr;
  if (status == ResponseStatus::kIncomplete) incomplete = Json{{"reason", "max_output_tokens"}};
  // Key order as OpenAI's own responses.
  return Json{{"id", s.id},
              {"object", "response"},
              {"created_at", s.created_at},
              {"status", response_status_name(status)},
              {"background", false},
              {"error", std::move(error_json)},
              {"incomplete_details", std::move(incomplete)},
              {"instructions", s.instructions},
              {"max_output_tokens", s.max_output_tokens},
              {"max_tool_calls", nullptr},
              {"model", s.model},
              {"output", std::move(output)},
              {"parallel_tool_calls", s.parallel_tool_calls},
              {"previous_response_id", s.previous_response_id},
              {"reasoning", s.reasoning},
              {"store", s.store},
              {"temperature", s.temperature},
              {"text", s.text},
              {"tool_choice", s.tool_choice},
              {"tools", s.tools},
              {"top_logprobs", s.top_logprobs},
              {"top_p", s.top_p},
              {"truncation", s.truncation},
              {"usage", usage},
              {"user", s.user},
              {"metadata", s.metadata}};
}

ResponseStatus response_final_status(const GenerationResult& result) {
  if (!result.error.empty() || result.samples.empty()) return ResponseStatus::kFailed;
  const std::string& reason = result.samples.front().finish.reason;
  if (reason == "error") return ResponseStatus::kFailed;
  if (reason == "length") return ResponseStatus::kIncomplete;
  return ResponseStatus::kCompleted;
}

std::vector<OutputItem> response_output_items(const ParsedCompletion& parsed, ResponseStatus status,
                                              bool parallel_tool_calls,
                                              const ItemIdGenerator& ids) {
  std::vector<OutputItem> items;
  if (!parsed.reasoning_content.empty()) {
    items.push_back(make_item(OutputItem::Kind::kReasoning, ids));
    items.back().text = parsed.reasoning_content;
  }
  if (!parsed.content.empty()) {
    items.push_back(make_item(OutputItem::Kind::kMessage, ids));
    items.back().text = parsed.content;
  }
  for (const ParsedToolCall& call : parsed.tool_calls) {
    items.push_back(make_item(OutputItem::Kind::kFunctionCall, ids));
    items.back().call_id = call.id;
    items.back().name = call.name;
    items.back().arguments = call.arguments;
    if (!parallel_tool_calls) break;
  }
  if (items.empty()) items.push_back(make_item(OutputItem::Kind::kMessage, ids));
  if (status == ResponseStatus::kIncomplete || status == ResponseStatus::kFailed) {
    items.back().status = "incomplete";  // the item the output stopped in
  }
  return items;
}

void ReasoningTokenCounter::feed(const SampleDelta& delta) {
  if (seen_answer_) return;
  if (!delta.parsed.content.empty() || !delta.parsed.tool_calls.empty()) {
    seen_answer_ = true;
    return;
  }
  if (!delta.parsed.reasoning.empty()) seen_reasoning_ = true;
  count_ += static_cast<int64_t>(delta.tokens.size());
}

ResponseEventWriter::ResponseEventWriter(ResponseSettings settings, ItemIdGenerator ids)
    : settings_(std::move(settings)), ids_(std::move(ids)) {}

void ResponseEventWriter::emit(std::vector<SseEvent>& out, std::string_view type, Json body) {
  Json event{{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : body.items()) event[key] = std::move(value);
  out.push_back(SseEvent{std::string(type), dump_json(event)});
}

std::vector<SseEvent> ResponseEventWriter::start() {
  std::vector<SseEvent> out;
  const Json response = response_json(settings_, ResponseStatus::kInProgress, items_, nullptr);
  emit(out, "response.created", Json{{"response", response}});
  emit(out, "response.in_progress", Json{{"response", response}});
  return out;
}

void ResponseEventWriter::open(std::vector<SseEvent>& out, OutputItem::Kind kind,
                               std::string call_id, std::string name) {
  if (item_open_) close(out, "completed");
  items_.push_back(make_item(kind, ids_));
  items_.back().status = "in_progress";
  items_.back().call_id = std::move(call_id);
  items_.back().name = std::move(name);
  item_open_ = true;
  const OutputItem& item = items_.back();
  const int64_t index = static_cast<int64_t>(items_.size()) - 1;
  emit(out, "response.output_item.added",
       Json{{"output_index", index}, {"item", response_item_json(item)}});
  if (kind == OutputItem::Kind::kFunctionCall) return;
  emit(out, "response.content_part.added",
       Json{{"item_id", item.id},
            {"output_index", index},
            {"content_index", 0},
            {"part", kind == OutputItem::Kind::kReasoning ? reasoning_part("") : text_part("")}});
}

void ResponseEventWriter::close(std::vector<SseEvent>& out, std::string_view status) {
  if (!item_open_) return;
  item_open_ = false;
  open_call_ = -1;
  OutputItem& item = items_.back();
  item.status = std::string(status);
  const int64_t index = static_cast<int64_t>(items_.size()) - 1;
  switch (item.kind) {
    case OutputItem::Kind::kReasoning:
      emit(out, "response.reasoning_text.done",
           Json{{"item_id", item.id},
                {"output_index", index},
                {"content_index", 0},
                {"text", item.text}});
      emit(out, "response.content_part.done",
           Json{{"item_id", item.id},
                {"output_index", index},
                {"content_index", 0},
                {"part", reasoning_part(item.text)}});
      break;
    case OutputItem::Kind::kMessage:
      emit(out, "response.output_text.done",
           Json{{"item_id", item.id},
                {"output_index", index},
                {"content_index", 0},
                {"text", item.text},
                {"logprobs", Json::array()}});
      emit(out, "response.content_part.done",
           Json{{"item_id", item.id},
                {"output_index", index},
                {"content_index", 0},
                {"part", text_part(item.text)}});
      break;
    case OutputItem::Kind::kFunctionCall:
      emit(out, "response.function_call_arguments.done",
           Json{{"item_id", item.id},
                {"output_index", index},
                {"name", item.name},
                {"arguments", item.arguments}});
      break;
  }
  emit(out, "response.output_item.done",
       Json{{"output_index", index}, {"item", response_item_json(item)}});
}

void ResponseEventWriter::add_reasoning(std::vector<SseEvent>& out, const std::string& text) {
  if (!item_open_ || items_.back().kind != OutputItem::Kind::kReasoning) {
    open(out, OutputItem::Kind::kReasoning);
  }
  OutputItem& item = items_.back();
  item.text += text;
  emit(out, "response.reasoning_text.delta",
       Json{{"item_id", item.id},
            {"output_index", static_cast<int64_t>(items_.size()) - 1},
            {"content_index", 0},
            {"delta", text}});
}

void ResponseEventWriter::add_content(std::vector<SseEvent>& out, const std::string& text) {
  if (!item_open_ || items_.back().kind != OutputItem::Kind::kMessage) {
    open(out, OutputItem::Kind::kMessage);
  }
  OutputItem& item = items_.back();
  item.text += text;
  emit(out, "response.output_text.delta",
       Json{{"item_id", item.id},
            {"output_index", static_cast<int64_t>(items_.size()) - 1},
            {"content_index", 0},
            {"delta", text},
            {"logprobs", Json::array()}});
}

void ResponseEventWriter::add_tool_call(std::vector<SseEvent>& out, const ToolCallDelta& call) {
  if (!first_call_) first_call_ = call.index;
  if (!settings_.parallel_tool_calls && call.index != *first_call_) return;
  const bool open_here = item_open_ && items_.back().kind == OutputItem::Kind::kFunctionCall &&
                         open_call_ == call.index;
  if (!open_here) {
    // DSML calls come one after the other, so a call once left is finished; a late fragment
    // for it (which the parser never sends) could not be streamed any more and is dropped.
    if (call.index <= last_call_) return;
    open(out, OutputItem::Kind::kFunctionCall, call.id.empty() ? ids_("call_") : call.id,
         call.name);
    open_call_ = call.index;
    last_call_ = call.index;
  }
  if (call.arguments.empty()) return;
  OutputItem& item = items_.back();
  item.arguments += call.arguments;
  emit(out, "response.function_call_arguments.delta",
       Json{{"item_id", item.id},
            {"output_index", static_cast<int64_t>(items_.size()) - 1},
            {"delta", call.arguments}});
}

std::vector<SseEvent> ResponseEventWriter::delta(const SampleDelta& delta) {
  std::vector<SseEvent> out;
  if (status_ != ResponseStatus::kInProgress) return out;
  reasoning_tokens_.feed(delta);
  // DeepSeek-V4 writes reasoning, then content, then tool calls; a delta holding several
  // kinds is emitted in that order.
  if (!delta.parsed.reasoning.empty()) add_reasoning(out, delta.parsed.reasoning);
  if (!delta.parsed.content.empty()) add_content(out, delta.parsed.content);
  for (const ToolCallDelta& call : delta.parsed.tool_calls) add_tool_call(out, call);
  return out;
}

std::vector<SseEvent> ResponseEventWriter::finish(const GenerationResult& result) {
  std::vector<SseEvent> out;
  if (status_ != ResponseStatus::kInProgress) return out;
  const ResponseStatus status = response_final_status(result);
  const bool stopped_early = status != ResponseStatus::kCompleted;
  if (item_open_) close(out, stopped_early ? "incomplete" : "completed");
  if (items_.empty() && status != ResponseStatus::kFailed) {
    open(out, OutputItem::Kind::kMessage);  // never an empty output (see the header)
    close(out, stopped_early ? "incomplete" : "completed");
  }
  status_ = status;
  const std::string error = result.error;
  final_ = response_json(settings_, status_, items_,
                         responses_usage_json(result.usage, reasoning_tokens_.count()), error);
  std::string_view type = status_ == ResponseStatus::kCompleted    ? "response.completed"
                          : status_ == ResponseStatus::kIncomplete ? "response.incomplete"
                                                                   : "response.failed";
  emit(out, type, Json{{"response", final_}});
  return out;
}

}  // namespace flint::server
