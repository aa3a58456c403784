#include "server/openai_responses.h"

#include <exception>
#include <string>
#include <utility>

#include "base/log.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/openai_common.h"
#include "server/responses_output.h"
#include "server/sse_stream.h"

namespace flint::server {
namespace {

// Glue between the pipeline and the formatters. on_start runs on the HTTP thread, on_delta
// and on_finish on the engine thread, never concurrently (generation.h).
class ResponsesSink : public GenerationSink {
 public:
  ResponsesSink(ApiContext& ctx, std::shared_ptr<ResponseStore> store, ResponseSettings settings,
                std::vector<ChatMessage> input, std::shared_ptr<const ConversationTurn> previous,
                std::shared_ptr<Responder> responder, std::shared_ptr<SseStream> stream)
      : ctx_(ctx),
        store_(std::move(store)),
        settings_(settings),
        input_(std::move(input)),
        previous_(std::move(previous)),
        responder_(std::move(responder)),
        stream_(std::move(stream)),
        writer_(std::move(settings), ids()) {}

  void on_start() override {
    if (stream_) send(writer_.start());
  }

  void on_delta(const SampleDelta& delta) override {
    if (stream_) {
      send(writer_.delta(delta));
    } else {
      reasoning_tokens_.feed(delta);
    }
  }

  void on_finish(const GenerationResult& result) override {
    if (result.aborted) {
      // The client went away (then nothing reaches it) or the server is shutting down (then
      // it learns why). Not stored: the output is cut short.
      GenerationResult failed = result;
      failed.error = "the request was aborted: the client went away or the server is shutting down";
      if (stream_) {
        send(writer_.finish(failed));
        stream_->finish();
      } else {
        const ApiError error(503, "", failed.error);
        responder_->respond(error.status(), "application/json", openai_error_body(error));
      }
      return;
    }
    if (stream_) {
      std::vector<SseEvent> events = writer_.finish(result);
      // Stored before the terminal event goes out, so that a client chaining from this
      // response the moment it reads response.completed finds it.
      remember(writer_.status(), writer_.final_response());
      send(events);
      stream_->finish();
      return;
    }
    const ResponseStatus status = response_final_status(result);
    if (status == ResponseStatus::kFailed) {
      const ApiError error(500, "",
                           result.error.empty() ? "the engine failed the request" : result.error);
      responder_->respond(error.status(), "application/json", openai_error_body(error));
      return;
    }
    const Json response =
        response_json(settings_, status,
                      response_output_items(result.samples.front().parsed, status,
                                            settings_.parallel_tool_calls, ids()),
                      responses_usage_json(result.usage, reasoning_tokens_.count()));
    remember(status, response);
    responder_->respond(200, "application/json", dump_json(response));
  }

 private:
  ItemIdGenerator ids() {
    ApiContext* ctx = &ctx_;
    return [ctx](std::string_view prefix) { return ctx->make_id(prefix); };
  }

  void send(const std::vector<SseEvent>& events) {
    for (const SseEvent& event : events) {
      if (!stream_->send(event.data, event.name)) return;  // client gone; the engine aborts
    }
  }

  void remember(ResponseStatus status, const Json& response) {
    if (!settings_.store || status == ResponseStatus::kFailed) return;
    try {
      const Json* output = field(response, "output");
      StoredResponse stored;
      stored.response_json = dump_json(response);
      stored.conversation = store_->make_turn(
          previous_, response_turn_messages(input_, output ? *output : Json::array()));
      store_->put(settings_.id, std::move(stored));
    } catch (const std::exception& e) {
      // Our own output always parses; never let a surprise escape onto the engine thread.
      spdlog::warn("responses: could not store {}: {}", settings_.id, e.what());
    }
  }

  ApiContext& ctx_;
  std::shared_ptr<ResponseStore> store_;
  ResponseSettings settings_;
  std::vector<ChatMessage> input_;
  std::shared_ptr<const ConversationTurn> previous_;
  std::shared_ptr<Responder> responder_;
  std::shared_ptr<SseStream> stream_;       // null: a whole response
  ResponseEventWriter writer_;              // streaming only
  ReasoningTokenCounter reasoning_tokens_;  // whole responses (the writer counts its own)
};

}  // namespace

SamplingParams responses_sampling(const SamplingParams& defaults, const ResponsesRequest& request) {
  SamplingParams sampling = defaults;
  sampling.n = 1;
  if (request.temperature) sampling.temperature = *request.temperature;
  if (request.top_p) sampling.top_p = *request.top_p;
  if (request.max_output_tokens) sampling.max_tokens = *request.max_output_tokens;
  return sampling;
}

std::vector<ChatMessage> response_turn_messages(const std::vector<ChatMessage>& input,
                                                const Json& output) {
  std::vector<ChatMessage> messages = input;
  std::vector<ChatMessage> answer = parse_response_items(output, "output");
  messages.insert(messages.end(), std::make_move_iterator(answer.begin()),
                  std::make_move_iterator(answer.end()));
  return messages;
}

ResponsesApi::ResponsesApi(std::size_t capacity, std::size_t max_bytes)
    : store_(std::make_shared<ResponseStore>(capacity, max_bytes)) {}

void ResponsesApi::handle_create(ApiContext& ctx, const Request& request,
                                 std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  ResponsesRequest parsed = parse_responses_request(body);

  std::shared_ptr<const ConversationTurn> previous;
  if (parsed.previous_response_id) {
    std::optional<StoredResponse> stored = store_->get(*parsed.previous_response_id);
    if (!stored) {
      throw ApiError(400, "previous_response_id", "Previous response with id '{}' not found.",
                     *parsed.previous_response_id);
    }
    previous = std::move(stored->conversation);
  }
  const ChatRequest chat = build_responses_chat(parsed, flatten_conversation(previous));

  GenerationSpec spec;
  spec.request.sampling = responses_sampling(ctx.config().default_sampling, parsed);
  prepare_chat(ctx, chat, spec);
  apply_request_extras(ctx, body, spec.request);  // cache_salt, flint_debug_replay
  spec.endpoint = "responses";

  ResponseSettings settings = std::move(parsed.settings);
  settings.id = ctx.make_id("resp_");
  settings.created_at = ApiContext::unix_time();
  settings.model = parsed.model.value_or(ctx.model_name());
  settings.temperature = spec.request.sampling.temperature;
  settings.top_p = spec.request.sampling.top_p;

  std::shared_ptr<SseStream> stream;
  if (parsed.stream) {
    stream = std::make_shared<SseStream>(responder);
    spec.stream = stream;
  }
  auto sink =
      std::make_shared<ResponsesSink>(ctx, store_, std::move(settings), std::move(parsed.input),
                                      std::move(previous), responder, std::move(stream));
  start_generation(ctx, std::move(spec), std::move(sink), std::move(responder));
}

void ResponsesApi::handle_get(ApiContext& /*ctx*/, std::string_view id,
                              std::shared_ptr<Responder> responder) {
  std::optional<StoredResponse> stored = store_->get(id);
  if (!stored) throw ApiError(404, "", "Response with id '{}' not found.", id);
  responder->respond(200, "application/json", std::move(stored->response_json));
}

void ResponsesApi::handle_delete(ApiContext& /*ctx*/, std::string_view id,
                                 std::shared_ptr<Responder> responder) {
  if (!store_->erase(id)) throw ApiError(404, "", "Response with id '{}' not found.", id);
  const Json body{{"id", id}, {"object", "response.deleted"}, {"deleted", true}};
  responder->respond(200, "application/json", dump_json(body));
}

}  // namespace flint::server
