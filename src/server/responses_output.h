// Generation output -> Responses API objects and SSE events (pure formatting, no engine).
//
// A response's `output` is a list of items in the order the model produced them:
//   {"type":"reasoning","id":"rs_..","summary":[],"content":[{"type":"reasoning_text","text"}]}
//   {"type":"message","id":"msg_..","status","role":"assistant",
//    "content":[{"type":"output_text","text","annotations":[]}]}
//   {"type":"function_call","id":"fc_..","status","arguments","call_id":"call_..","name"}
// A reasoning item only when there was reasoning, a message only when there was content (or
// when nothing at all was produced: then one empty message, so that output is never empty).
// With parallel_tool_calls false only the first call is kept.
//
// Status: "completed"; "incomplete" with incomplete_details {"reason":"max_output_tokens"}
// when the output hit max_output_tokens or the context limit (the item being written is then
// "incomplete" too); "failed" with error {"code":"server_error","message"} when the engine
// failed the request.
//
// Streaming follows the API's event sequence, every event carrying "type" and an increasing
// "sequence_number": response.created, response.in_progress, then per item
// response.output_item.added, its part events (message: content_part.added,
// output_text.delta..., output_text.done, content_part.done; reasoning: content_part.added
// with a reasoning_text part, reasoning_text.delta..., reasoning_text.done,
// content_part.done; function_call: function_call_arguments.delta..., .done),
// response.output_item.done; finally response.completed, response.incomplete or
// response.failed carrying the whole response. The streamed items are exactly the final
// response's items (same ids and text).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/generation.h"
#include "server/json_fields.h"

namespace flint::server {

// Makes item ids: prefix ("rs_", "msg_", "fc_") + a unique suffix. Called on the engine
// thread while streaming (ApiContext::make_id is thread-safe).
using ItemIdGenerator = std::function<std::string(std::string_view prefix)>;

// What the response object reports besides its output: identity and the echoed settings.
struct ResponseSettings {
  std::string id;  // "resp_..."
  int64_t created_at = 0;
  std::string model;
  Json instructions = nullptr;  // string or null
  Json max_output_tokens = nullptr;
  Json previous_response_id = nullptr;
  Json reasoning = Json{{"effort", nullptr}, {"summary", nullptr}};
  bool parallel_tool_calls = true;
  bool store = true;
  double temperature = 1.0;  // effective values
  double top_p = 1.0;
  Json text = Json{{"format", Json{{"type", "text"}}}};
  Json tool_choice = "auto";
  Json tools = Json::array();  // as sent
  Json top_logprobs = 0;
  Json truncation = "disabled";
  Json metadata = Json::object();
  Json user = nullptr;
};

enum class ResponseStatus { kInProgress, kCompleted, kIncomplete, kFailed };
std::string_view response_status_name(ResponseStatus status);

struct OutputItem {
  enum class Kind { kReasoning, kMessage, kFunctionCall };
  Kind kind = Kind::kMessage;
  std::string id;
  std::string text;  // reasoning text or message text
  std::string call_id;
  std::string name;
  std::string arguments;
  std::string status = "completed";  // in_progress, completed, incomplete
};

Json response_item_json(const OutputItem& item);
Json responses_usage_json(const engine::Usage& usage, int64_t reasoning_tokens);
// The response object. `usage` null while in progress; `error` only for kFailed.
Json response_json(const ResponseSettings& settings, ResponseStatus status,
                   const std::vector<OutputItem>& items, const Json& usage,
                   std::string_view error = {});

// The status a finished generation gets: failed on an engine error, incomplete on "length".
ResponseStatus response_final_status(const GenerationResult& result);

// The items of a whole (non-streamed) sample, in the order the model writes them.
std::vector<OutputItem> response_output_items(const ParsedCompletion& parsed, ResponseStatus status,
                                              bool parallel_tool_calls, const ItemIdGenerator& ids);

// Reasoning tokens of a sample, counted from its deltas: the tokens before the first content
// or tool-call text, when there was reasoning at all (a close estimate: the delta where
// reasoning turns into content is not split).
class ReasoningTokenCounter {
 public:
  void feed(const SampleDelta& delta);
  int64_t count() const { return seen_reasoning_ ? count_ : 0; }

 private:
  int64_t count_ = 0;
  bool seen_reasoning_ = false;
  bool seen_answer_ = false;
};

struct SseEvent {
  std::string name;  // the event's "type"
  std::string data;  // compact JSON
};

// The streamed form: feed it the sample's deltas, get the events to send, in order.
// Not thread-safe; the sink calls it from one thread at a time (on_start, then the engine
// thread).
class ResponseEventWriter {
 public:
  ResponseEventWriter(ResponseSettings settings, ItemIdGenerator ids);

  // response.created and response.in_progress.
  std::vector<SseEvent> start();
  std::vector<SseEvent> delta(const SampleDelta& delta);
  // Closes the open item and ends with the terminal event for `result`.
  std::vector<SseEvent> finish(const GenerationResult& result);

  const std::vector<OutputItem>& items() const { return items_; }
  // The response object as the terminal event carries it (after finish()).
  const Json& final_response() const { return final_; }
  ResponseStatus status() const { return status_; }

 private:
  void emit(std::vector<SseEvent>& out, std::string_view type, Json body);
  // Closes the open item (completed) and starts a new one; call_id and name for a call.
  void open(std::vector<SseEvent>& out, OutputItem::Kind kind, std::string call_id = {},
            std::string name = {});
  void close(std::vector<SseEvent>& out, std::string_view status);
  void add_reasoning(std::vector<SseEvent>& out, const std::string& text);
  void add_content(std::vector<SseEvent>& out, const std::string& text);
  void add_tool_call(std::vector<SseEvent>& out, const ToolCallDelta& call);

  ResponseSettings settings_;
  ItemIdGenerator ids_;
  int64_t sequence_ = 0;
  std::vector<OutputItem> items_;
  bool item_open_ = false;         // items_.back() is being streamed
  std::optional<int> first_call_;  // the parser's index of the first tool call
  int open_call_ = -1;             // the parser's index of the open function_call item
  int last_call_ = -1;             // the parser's index of the last call opened
  ReasoningTokenCounter reasoning_tokens_;
  ResponseStatus status_ = ResponseStatus::kInProgress;
  Json final_;
};

}  // namespace flint::server
