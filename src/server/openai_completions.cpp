#include "server/openai_completions.h"

#include <mutex>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai_common.h"
#include "server/sampling_json.h"

namespace flint::server {

namespace {

struct Prompt {
  std::vector<int32_t> ids;
  std::string text;  // for echo
};

std::vector<Prompt> parse_prompts(const ApiContext& ctx, const Json& body, bool add_special) {
  const Json* prompt = field(body, "prompt");
  if (prompt == nullptr) throw ApiError(400, "prompt", "prompt: is required");
  auto ids_of = [&](const Json& list, const std::string& path) {
    Prompt p;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer()) {
        const std::string at = join_path(path, i);
        throw ApiError(400, at, "{}: expected a token id, got {}", at, json_type_name(list[i]));
      }
      p.ids.push_back(list[i].get<int32_t>());
    }
    for (int32_t id : p.ids) {
      if (!ctx.tokenizer().is_valid_id(id)) {
        throw ApiError(400, path, "{}: token id {} is outside the vocabulary", path, id);
      }
    }
    p.text = ctx.tokenizer().decode(p.ids);
    return p;
  };
  auto text_of = [&](const std::string& text) {
    Prompt p;
    p.text = text;
    ctx.tokenizer().encode(text, add_special, p.ids);
    return p;
  };
  std::vector<Prompt> prompts;
  if (prompt->is_string()) {
    prompts.push_back(text_of(prompt->get<std::string>()));
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    prompts.push_back(ids_of(*prompt, "prompt"));
  } else if (prompt->is_array() && !prompt->empty()) {
    for (std::size_t i = 0; i < prompt->size(); ++i) {
      const Json& item = (*prompt)[i];
      const std::string path = join_path("prompt", i);
      if (item.is_string()) {
        prompts.push_back(text_of(item.get<std::string>()));
      } else if (item.is_array()) {
        prompts.push_back(ids_of(item, path));
      } else {
        throw ApiError(400, path, "{}: expected a string or a list of token ids, got {}", path,
                       json_type_name(item));
      }
    }
  } else {
    throw ApiError(400, "prompt",
                   "prompt: expected a string, a list of token ids, or a non-empty list of them");
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].ids.empty()) {
      throw ApiError(400, "prompt", "prompt{}: is empty (give at least one token)",
                     prompts.size() > 1 ? fmt::format("[{}]", i) : "");
    }
  }
  return prompts;
}

// The completions logprobs shape: tokens, token_logprobs, top_logprobs, text_offset.
Json completion_logprobs(const ApiContext& ctx, const std::vector<SampleResult>& results,
                         std::size_t text_offset) {
  Json tokens = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (const SampleResult& r : results) {
    const std::string text = token_text(ctx, r.token);
    tokens.push_back(text);
    logprobs.push_back(r.logprob);
    Json top = Json::object();
    for (const TokenLogprob& t : r.top) top[token_text(ctx, t.token)] = t.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += text.size();
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(logprobs)},
              {"top_logprobs", std::move(tops)},
              {"text_offset", std::move(offsets)}};
}

// One response for all prompts of the request: choice index = prompt * n + sample. Every
// generation reports here; the response (or the stream's end) goes out when the last is done.
class CompletionBatch {
 public:
  CompletionBatch(ApiContext& ctx, std::shared_ptr<Responder> responder,
                  std::shared_ptr<SseStream> stream, StreamOptions options, int64_t n,
                  std::size_t prompts, bool logprobs, bool echo)
      : ctx_(ctx),
        responder_(std::move(responder)),
        stream_(std::move(stream)),
        options_(options),
        n_(n),
        logprobs_(logprobs),
        echo_(echo),
        remaining_(prompts),
        choices_(prompts * static_cast<std::size_t>(n)),
        text_offsets_(choices_.size(), 0),
        id_(ctx.make_id("cmpl-")),
        created_(ApiContext::unix_time()) {}

  void delta(std::size_t prompt, const std::string& prompt_text, const SampleDelta& d) {
    if (!stream_) return;
    std::lock_guard lock(mutex_);
    const std::size_t index = prompt * static_cast<std::size_t>(n_) + static_cast<std::size_t>(d.sample);
    std::string text = d.text;
    if (echo_ && !echoed(index)) text = prompt_text + text;
    if (text.empty() && !d.finish && !(logprobs_ && !d.logprobs.empty())) return;
    Json choice = {{"index", index}, {"text", text}};
    choice["logprobs"] = logprobs_ ? completion_logprobs(ctx_, d.logprobs, text_offsets_[index])
                                   : Json(nullptr);
    for (const SampleResult& r : d.logprobs) text_offsets_[index] += token_text(ctx_, r.token).size();
    choice["finish_reason"] = d.finish ? Json(d.finish->reason) : Json(nullptr);
    Json chunk = base();
    chunk["choices"] = Json::array({std::move(choice)});
    stream_->send(dump_json(chunk));
  }

  void finish(std::size_t prompt, const std::string& prompt_text, const GenerationResult& r) {
    std::lock_guard lock(mutex_);
    usage_.prompt_tokens += r.usage.prompt_tokens;
    usage_.completion_tokens += r.usage.completion_tokens;
    usage_.cached_prompt_tokens += r.usage.cached_prompt_tokens;
    aborted_ = aborted_ || r.aborted;
    if (!r.error.empty()) error_ = r.error;
    for (std::size_t k = 0; k < r.samples.size(); ++k) {
      const SampleOutput& s = r.samples[k];
      const std::size_t index = prompt * static_cast<std::size_t>(n_) + k;
      Json choice = {{"index", index}, {"text", echo_ ? prompt_text + s.text : s.text}};
      choice["logprobs"] = logprobs_ ? completion_logprobs(ctx_, s.logprobs, echo_ ? prompt_text.size() : 0)
                                     : Json(nullptr);
      choice["finish_reason"] = s.finish.reason;
      choice["stop_reason"] = s.finish.stop_string ? Json(*s.finish.stop_string)
                              : s.finish.stop_token ? Json(*s.finish.stop_token)
                                                    : Json(nullptr);
      choices_[index] = std::move(choice);
    }
    if (--remaining_ > 0) return;
    if (stream_) {
      if (!error_.empty()) {
        stream_->send(openai_error_body(ApiError(500, "", error_)));
      } else if (options_.include_usage) {
        Json chunk = base();
        chunk["choices"] = Json::array();
        chunk["usage"] = usage_json(usage_);
        stream_->send(dump_json(chunk));
      }
      stream_->send_raw("data: [DONE]\n\n");
      stream_->finish();
      return;
    }
    if (aborted_) return respond_aborted(*responder_);  // a no-op if the client is gone
    if (!error_.empty()) {
      responder_->respond(500, "application/json", openai_error_body(ApiError(500, "", error_)));
      return;
    }
    Json body = base();
    body["object"] = "text_completion";
    body["choices"] = Json(choices_);
    body["usage"] = usage_json(usage_);
    responder_->respond(200, "application/json", dump_json(body));
  }

 private:
  bool echoed(std::size_t index) {
    if (echo_done_.size() < choices_.size()) echo_done_.resize(choices_.size(), false);
    const bool was = echo_done_[index];
    echo_done_[index] = true;
    return was;
  }
  Json base() const {
    return Json{{"id", id_}, {"object", "text_completion"}, {"created", created_},
                {"model", ctx_.model_name()}};
  }

  ApiContext& ctx_;
  std::shared_ptr<Responder> responder_;
  std::shared_ptr<SseStream> stream_;
  StreamOptions options_;
  int64_t n_;
  bool logprobs_, echo_;
  std::mutex mutex_;  // generations of different prompts report from the engine thread, but
                      // the last one may also fail on the I/O thread
  std::size_t remaining_;
  std::vector<Json> choices_;
  std::vector<std::size_t> text_offsets_;
  std::vector<bool> echo_done_;
  engine::Usage usage_;
  bool aborted_ = false;
  std::string error_;
  const std::string id_;
  const int64_t created_;
};

class CompletionSink : public GenerationSink {
 public:
  CompletionSink(std::shared_ptr<CompletionBatch> batch, std::size_t prompt, std::string text)
      : batch_(std::move(batch)), prompt_(prompt), text_(std::move(text)) {}
  void on_delta(const SampleDelta& d) override { batch_->delta(prompt_, text_, d); }
  void on_finish(const GenerationResult& r) override { batch_->finish(prompt_, text_, r); }

 private:
  std::shared_ptr<CompletionBatch> batch_;
  std::size_t prompt_;
  std::string text_;
};

}  // namespace

void handle_completions(ApiContext& ctx, const Request& request,
                        std::shared_ptr<Responder> responder) {
  const Json body = parse_body(request.body);
  ctx.check_model(body);
  if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty()) {
    throw ApiError(400, "suffix", "suffix: fill-in-the-middle is not supported");
  }
  const bool echo = get_bool(body, "echo").value_or(false);
  const bool add_special = get_bool(body, "add_special_tokens").value_or(true);
  const SamplingParams sampling =
      parse_sampling(body, ctx.config().default_sampling, SamplingDialect::kCompletions);
  const StreamOptions options = parse_stream_options(body);
  std::vector<Prompt> prompts = parse_prompts(ctx, body, add_special);

  std::vector<GenerationSpec> specs;
  for (Prompt& p : prompts) {
    GenerationSpec spec;
    spec.endpoint = "completions";
    spec.request.prompt = std::move(p.ids);
    spec.request.sampling = sampling;
    apply_request_extras(ctx, body, spec.request);
    spec.request.id = ctx.make_id("cmpl-");
    // Every prompt is checked before any starts, so a bad one fails the request whole.
    try {
      ctx.engine().validate(spec.request);
    } catch (const Error& e) {
      ApiError error = bad_request(e);
      if (prompts.size() > 1) {
        throw ApiError(400, error.param(), "prompt[{}]: {}", specs.size(), error.what());
      }
      throw error;
    }
    specs.push_back(std::move(spec));
  }
  std::shared_ptr<SseStream> stream;
  if (options.stream) stream = std::make_shared<SseStream>(responder);
  auto batch = std::make_shared<CompletionBatch>(ctx, responder, stream, options, sampling.n,
                                                 specs.size(), sampling.logprobs.has_value(), echo);
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    // One SSE stream for all prompts: started with the first, registered for keep-alive once.
    if (i == 0) specs[i].stream = stream;
    auto sink = std::make_shared<CompletionSink>(batch, i, prompts[i].text);
    try {
      ids.push_back(start_generation(ctx, std::move(specs[i]), sink, responder));
    } catch (const ApiError& e) {
      if (i == 0) throw;  // nothing started: the router answers with the error
      // The response has begun (or other prompts run): the rest fail inside it.
      for (std::size_t k = i; k < specs.size(); ++k) {
        GenerationResult failed;
        failed.error = e.what();
        failed.samples.resize(static_cast<std::size_t>(sampling.n));
        batch->finish(k, prompts[k].text, failed);
      }
      break;
    }
  }
  if (ids.size() > 1) {
    engine::Engine& engine = ctx.engine();
    responder->on_disconnect([&engine, ids] {
      for (const auto& id : ids) engine.abort(id);
    });
  }
}

}  // namespace flint::server
