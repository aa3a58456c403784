#include "server/openai_chat.h"

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/generation.h"
#include "server/openai_common.h"
#include "server/sampling_json.h"

namespace flint::server {

namespace {

Json tool_call_json(const ParsedToolCall& call) {
  return Json{{"id", call.id},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

class ChatSink : public GenerationSink {
 public:
  ChatSink(ApiContext& ctx, std::shared_ptr<Responder> responder, StreamOptions options,
           bool logprobs)
      : ctx_(ctx),
        responder_(std::move(responder)),
        options_(options),
        logprobs_(logprobs),
        id_(ctx.make_id("chatcmpl-")),
        created_(ApiContext::unix_time()) {}

  void set_stream(std::shared_ptr<SseStream> stream) { stream_ = std::move(stream); }
  void set_samples(int64_t n) { samples_ = n; }

  void on_start() override {
    if (!stream_) return;
    // The role first, one chunk per choice, as OpenAI sends it.
    for (int64_t i = 0; i < samples_; ++i) {
      Json choice = {{"index", i},
                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                     {"logprobs", nullptr},
                     {"finish_reason", nullptr}};
      send_chunk(Json::array({std::move(choice)}));
    }
  }

  void on_delta(const SampleDelta& d) override {
    if (!stream_) return;
    Json delta = Json::object();
    if (!d.parsed.reasoning.empty()) delta["reasoning_content"] = d.parsed.reasoning;
    if (!d.parsed.content.empty()) delta["content"] = d.parsed.content;
    if (!d.parsed.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ToolCallDelta& c : d.parsed.tool_calls) {
        Json call = {{"index", c.index}};
        Json function = Json::object();
        if (!c.id.empty()) {
          call["id"] = c.id;
          call["type"] = "function";
          function["name"] = c.name;
        }
        function["arguments"] = c.arguments;
        call["function"] = std::move(function);
        calls.push_back(std::move(call));
      }
      delta["tool_calls"] = std::move(calls);
    }
    const bool has_logprobs = logprobs_ && !d.logprobs.empty();
    if (delta.empty() && !d.finish && !has_logprobs) return;
    Json choice = {{"index", d.sample}, {"delta", std::move(delta)}};
    choice["logprobs"] =
        has_logprobs ? Json{{"content", chat_logprobs_content(ctx_, d.logprobs)}} : Json(nullptr);
    choice["finish_reason"] = d.finish ? Json(d.finish->reason) : Json(nullptr);
    if (d.finish) choice["stop_reason"] = stop_reason(*d.finish);
    send_chunk(Json::array({std::move(choice)}));
  }

  void on_finish(const GenerationResult& r) override {
    if (stream_) {
      if (!r.error.empty()) {
        stream_->send(openai_error_body(ApiError(500, "", r.error)));
      } else if (options_.include_usage) {
        Json chunk = base("chat.completion.chunk");
        chunk["choices"] = Json::array();
        chunk["usage"] = usage_json(r.usage);
        stream_->send(dump_json(chunk));
      }
      stream_->send_raw("data: [DONE]\n\n");
      stream_->finish();
      return;
    }
    if (r.aborted) return respond_aborted(*responder_);  // a no-op if the client is gone
    if (!r.error.empty()) {
      const ApiError e(500, "", r.error);
      responder_->respond(500, "application/json", openai_error_body(e));
      return;
    }
    Json body = base("chat.completion");
    Json choices = Json::array();
    for (size_t i = 0; i < r.samples.size(); ++i) {
      const SampleOutput& s = r.samples[i];
      Json message = {{"role", "assistant"}};
      message["content"] = s.parsed.content.empty() && !s.parsed.tool_calls.empty()
                               ? Json(nullptr)
                               : Json(s.parsed.content);
      if (!s.parsed.reasoning_content.empty()) {
        message["reasoning_content"] = s.parsed.reasoning_content;
      }
      Json calls = Json::array();
      for (const auto& call : s.parsed.tool_calls) calls.push_back(tool_call_json(call));
      message["tool_calls"] = std::move(calls);
      Json choice = {{"index", i}, {"message", std::move(message)}};
      choice["logprobs"] = logprobs_ ? Json{{"content", chat_logprobs_content(ctx_, s.logprobs)}}
                                     : Json(nullptr);
      choice["finish_reason"] = s.finish.reason;
      choice["stop_reason"] = stop_reason(s.finish);
      choices.push_back(std::move(choice));
    }
    body["choices"] = std::move(choices);
    body["usage"] = usage_json(r.usage);
    responder_->respond(200, "application/json", dump_json(body));
  }

 private:
  // vLLM's stop_reason: the stop string or stop token id that ended the choice.
  static Json stop_reason(const SampleFinish& f) {
    if (f.stop_string) return *f.stop_string;
    if (f.stop_token) return *f.stop_token;
    return nullptr;
  }

  Json base(std::string_view object) const {
    return Json{{"id", id_}, {"object", object}, {"created", created_}, {"model", ctx_.model_name()}};
  }

  void send_chunk(Json choices) {
    Json chunk = base("chat.completion.chunk");
    chunk["choices"] = std::move(choices);
    stream_->send(dump_json(chunk));
  }

  ApiContext& ctx_;
  std::shared_ptr<Responder> responder_;
  std::shared_ptr<SseStream> stream_;
  StreamOptions options_;
  bool logprobs_;
  int64_t samples_ = 1;
  const std::string id_;
  const int64_t created_;
};

// response_format: DeepSeek's encoder writes it into the leading system message (its
// "## Response Format" section), which is how the model was taught to follow one. flint has no
// guided decoding yet, so the format is a strong hint, not a guarantee (docs/server.md).
void apply_response_format(const Json& body, ChatRequest& chat) {
  const Json* format = get_object(body, "response_format");
  if (format == nullptr) return;
  const std::string type = get_string(*format, "type", "response_format").value_or("text");
  if (type == "text") return;
  if (type != "json_object" && type != "json_schema") {
    throw ApiError(400, "response_format.type",
                   "response_format.type: unknown value '{}' (valid: text, json_object, "
                   "json_schema)",
                   type);
  }
  const bool has_head = !chat.messages.empty() && (chat.messages[0].role == ChatRole::kSystem ||
                                                   chat.messages[0].role == ChatRole::kDeveloper);
  if (!has_head) {
    ChatMessage system;
    system.role = ChatRole::kSystem;
    system.content = "";
    chat.messages.insert(chat.messages.begin(), std::move(system));
  }
  chat.messages[0].response_format = *format;
}

}  // namespace

void handle_chat_completions(ApiContext& ctx, const Request& request,
                             std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  ChatRequest chat = parse_openai_chat(body);
  apply_response_format(body, chat);
  GenerationSpec spec;
  spec.endpoint = "chat";
  spec.request.sampling =
      parse_sampling(body, ctx.config().default_sampling, SamplingDialect::kChat);
  const StreamOptions options = parse_stream_options(body);
  prepare_chat(ctx, chat, spec);
  apply_request_extras(ctx, body, spec.request);
  auto sink = std::make_shared<ChatSink>(ctx, responder, options,
                                         spec.request.sampling.logprobs.has_value());
  sink->set_samples(spec.request.sampling.n);
  if (options.stream) {
    spec.stream = std::make_shared<SseStream>(responder);
    sink->set_stream(spec.stream);
  }
  start_generation(ctx, std::move(spec), sink, std::move(responder));
}

}  // namespace flint::server
