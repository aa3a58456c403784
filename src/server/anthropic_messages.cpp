// POST /v1/messages and /v1/messages/count_tokens: the glue between the Anthropic translation
// (anthropic_request.cpp, anthropic_stream.cpp) and the generation pipeline.
#include "server/anthropic_messages.h"

#include "server/chat_prompt.h"
#include "server/openai_common.h"

namespace flint::server {

namespace {

class MessagesSink : public GenerationSink {
 public:
  MessagesSink(ApiContext& ctx, std::shared_ptr<Responder> responder, int64_t prompt_tokens)
      : responder_(std::move(responder)),
        id_(ctx.make_id("msg_")),
        model_(ctx.model_name()),
        prompt_tokens_(prompt_tokens),
        formatter_(id_, model_) {}

  void set_stream(std::shared_ptr<SseStream> stream) { stream_ = std::move(stream); }

  void on_start() override {
    if (stream_) stream_->send_raw(formatter_.start(prompt_tokens_));
  }

  void on_delta(const SampleDelta& d) override {
    if (!stream_) return;
    std::string text = formatter_.delta(d.parsed);
    if (!text.empty()) stream_->send_raw(std::move(text));
  }

  void on_finish(const GenerationResult& r) override {
    if (stream_) {
      if (!r.error.empty() || (r.samples.empty() && !r.aborted)) {
        stream_->send_raw(anthropic_error_event(
            ApiError(500, "", r.error.empty() ? "the engine returned no output" : r.error)));
      } else if (r.aborted) {
        // The client is gone (the write is a no-op) or the server is shutting down: a stream
        // that just stopped would look complete to some clients, an error event does not.
        stream_->send_raw(anthropic_error_event(
            ApiError(503, "", "the request was aborted: the server is shutting down")));
      } else {
        stream_->send_raw(formatter_.finish(r.samples[0].finish, r.usage));
      }
      stream_->finish();
      return;
    }
    if (r.aborted) return;
    if (!r.error.empty() || r.samples.empty()) {
      const ApiError e(500, "", r.error.empty() ? "the engine returned no output" : r.error);
      responder_->respond(e.status(), "application/json", anthropic_error_body(e));
      return;
    }
    responder_->respond(200, "application/json",
                        dump_json(anthropic_message_json(id_, model_, r.samples[0], r.usage)));
  }

 private:
  std::shared_ptr<Responder> responder_;
  std::shared_ptr<SseStream> stream_;
  const std::string id_;
  const std::string model_;
  const int64_t prompt_tokens_;
  AnthropicStreamFormatter formatter_;
};

}  // namespace

void handle_messages(ApiContext& ctx, const Request& request,
                     std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  AnthropicRequest parsed = parse_anthropic_request(body, ctx.config().default_sampling);
  GenerationSpec spec;
  spec.endpoint = "messages";
  spec.request.sampling = std::move(parsed.sampling);
  prepare_chat(ctx, parsed.chat, spec);
  apply_request_extras(ctx, body, spec.request);
  auto sink = std::make_shared<MessagesSink>(ctx, responder,
                                             static_cast<int64_t>(spec.request.prompt.size()));
  if (parsed.stream) {
    spec.stream = std::make_shared<SseStream>(responder);
    sink->set_stream(spec.stream);
  }
  start_generation(ctx, std::move(spec), sink, std::move(responder));
}

void handle_count_tokens(ApiContext& ctx, const Request& request,
                         std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  const ChatRequest chat = parse_anthropic_chat(body);
  const ChatPromptText prompt = render_chat_prompt(ctx, chat);
  responder->respond(200, "application/json",
                     dump_json(Json{{"input_tokens", static_cast<int64_t>(prompt.ids.size())}}));
}

}  // namespace flint::server
