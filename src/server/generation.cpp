#include "server/generation.h"

#include <atomic>
#include <chrono>
#include <mutex>

#include "base/log.h"
#include "server/api_error.h"
#include "text/stop_strings.h"
#include "text/tokenizer.h"

namespace flint::server {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One sample's pipeline: tokens -> text -> stop strings -> parser.
struct SampleState {
  std::optional<text::StreamDecoder> decoder;
  std::optional<text::StopStrings> stops;
  std::optional<CompletionParser> parser;
  SampleOutput out;
  std::optional<CompletionDelta> prefix;  // the parser's output for spec.parser_prefix
  bool done = false;      // no more output (finish decided)
  bool reported = false;  // the final delta went out
  bool any_call = false;  // delivered at least one tool call
};

std::string engine_finish_name(engine::FinishReason r) {
  return r == engine::FinishReason::kNone ? "stop" : engine::finish_reason_name(r);
}

class Generation {
 public:
  Generation(ApiContext& ctx, GenerationSpec spec, std::shared_ptr<GenerationSink> sink)
      : ctx_(ctx), spec_(std::move(spec)), sink_(std::move(sink)), arrival_(Clock::now()) {
    samples_.resize(static_cast<size_t>(spec_.request.sampling.n));
  }

  const std::string& id() const { return spec_.request.id; }
  const GenerationSpec& spec() const { return spec_; }
  void client_gone() { client_gone_ = true; }

  // Engine thread.
  void on_event(const engine::RequestOutput& ev) {
    const auto now = Clock::now();
    if (!ev.tokens.empty()) {
      if (!first_token_) {
        first_token_ = true;
        ctx_.metrics().observe_time_to_first_token(seconds_between(arrival_, now));
      } else {
        ctx_.metrics().observe_inter_token_latency(seconds_between(last_output_, now),
                                                   static_cast<int64_t>(ev.tokens.size()));
      }
      last_output_ = now;
    }
    if (ev.sample >= 0 && static_cast<size_t>(ev.sample) < samples_.size()) {
      process(ev, samples_[static_cast<size_t>(ev.sample)], ev.sample);
    }
    if (ev.request_finished || ev.finish == engine::FinishReason::kError) finalize(ev, now);
  }

  // The request could not be submitted after its stream started (a full queue in a race).
  void fail(const std::string& message) {
    engine::RequestOutput ev;
    ev.request_id = id();
    ev.finish = engine::FinishReason::kError;
    ev.error = message;
    on_event(ev);
  }

 private:
  SampleState& init(SampleState& st) {
    if (!st.decoder) {
      const SamplingParams& p = spec_.request.sampling;
      st.decoder.emplace(ctx_.tokenizer(), p.skip_special_tokens && !spec_.parse_chat);
      st.stops.emplace(p.stop, p.include_stop_str_in_output);
      if (spec_.parse_chat) {
        CompletionParserOptions options;
        options.start = spec_.reasoning_start;
        options.tools.tools = spec_.tools;
        st.parser.emplace(options);
        if (!spec_.parser_prefix.empty()) {
          // The forced opening is not generated text: what the parser returns for it (the
          // call's header) goes out with the first delta.
          st.prefix = st.parser->feed(spec_.parser_prefix);
        }
      }
    }
    return st;
  }

  void process(const engine::RequestOutput& ev, SampleState& st, int32_t sample) {
    init(st);
    if (st.reported) return;  // ended by a stop string; the engine's later tokens are dropped
    SampleDelta d;
    d.sample = sample;
    const SamplingParams& p = spec_.request.sampling;
    for (size_t i = 0; i < ev.tokens.size() && !st.done; ++i) {
      d.tokens.push_back(ev.tokens[i]);
      if (i < ev.logprobs.size()) d.logprobs.push_back(ev.logprobs[i]);
      d.text += st.stops->push(st.decoder->push(ev.tokens[i]));
      if (st.stops->matched()) {
        st.done = true;
        st.out.finish = {"stop", st.stops->matched_string(), std::nullopt};
        // One sample: nothing more is needed from the engine. With several, the others go
        // on and this one's further tokens are ignored.
        if (p.n == 1) ctx_.engine().abort(id());
      }
    }
    if (!st.done && ev.finish != engine::FinishReason::kNone) {
      d.text += st.stops->push(st.decoder->flush());
      d.text += st.stops->flush();
      st.done = true;
      st.out.finish.reason = engine_finish_name(ev.finish);
      if (st.stops->matched()) {
        st.out.finish = {"stop", st.stops->matched_string(), std::nullopt};
      } else if (ev.finish == engine::FinishReason::kStop) {
        st.out.finish.stop_token = ev.stop_token;
      }
    }
    if (st.parser) {
      d.parsed = st.parser->feed(d.text);
      if (st.prefix) {
        CompletionDelta merged = std::move(*st.prefix);
        st.prefix.reset();
        append(merged, std::move(d.parsed));
        d.parsed = std::move(merged);
      }
      if (st.done) append(d.parsed, st.parser->finish());
      if (!spec_.deliver_tool_calls) d.parsed.tool_calls.clear();
      st.any_call = st.any_call || !d.parsed.tool_calls.empty();
    }
    st.out.tokens.insert(st.out.tokens.end(), d.tokens.begin(), d.tokens.end());
    st.out.logprobs.insert(st.out.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    st.out.text += d.text;
    if (st.done) {
      st.reported = true;
      if (st.parser) {
        st.out.parsed = st.parser->result();
        if (!spec_.deliver_tool_calls) st.out.parsed.tool_calls.clear();
        for (const auto& w : st.out.parsed.warnings) {
          spdlog::debug("request {}: model output: {}", id(), w);
        }
      }
      if (st.out.finish.reason == "stop" && st.any_call) st.out.finish.reason = "tool_calls";
      d.finish = st.out.finish;
    }
    if (!d.tokens.empty() || d.finish || !d.text.empty() || !d.parsed.empty()) {
      sink_->on_delta(d);
    }
  }

  static void append(CompletionDelta& to, CompletionDelta&& from) {
    to.reasoning += from.reasoning;
    to.content += from.content;
    for (auto& call : from.tool_calls) to.tool_calls.push_back(std::move(call));
  }

  void finalize(const engine::RequestOutput& ev, Clock::time_point now) {
    // Samples the engine ended without a final event of their own (abort, error).
    for (size_t k = 0; k < samples_.size(); ++k) {
      SampleState& st = samples_[k];
      if (st.reported) continue;
      engine::RequestOutput end;
      end.request_id = ev.request_id;
      end.sample = static_cast<int32_t>(k);
      end.finish = ev.finish == engine::FinishReason::kNone ? engine::FinishReason::kAbort
                                                            : ev.finish;
      process(end, st, static_cast<int32_t>(k));
    }
    GenerationResult result;
    result.request_id = id();
    result.usage = ev.usage;
    result.usage.completion_tokens = 0;
    for (auto& st : samples_) {
      result.usage.completion_tokens += static_cast<int64_t>(st.out.tokens.size());
      result.samples.push_back(std::move(st.out));
    }
    // An abort the server asked for (a stop string) is not the client's or the shutdown's.
    result.aborted =
        ev.finish == engine::FinishReason::kAbort && (client_gone_ || ctx_.draining());
    if (ev.finish == engine::FinishReason::kError) result.error = ev.error;

    Metrics::FinishedRequest m;
    m.e2e_seconds = seconds_between(arrival_, now);
    m.queue_seconds = ev.usage.queue_seconds;
    m.prompt_tokens = ev.usage.prompt_tokens;
    m.generation_tokens = result.usage.completion_tokens;
    m.max_tokens = spec_.request.sampling.max_tokens.value_or(0);
    const std::string& reason = result.samples.empty() ? "" : result.samples[0].finish.reason;
    m.finish_reason = reason == "tool_calls" ? "stop" : reason;
    ctx_.metrics().observe_finished(m);
    if (ctx_.config().enable_log_requests) {
      spdlog::info("request {} ({}): {} prompt tokens ({} cached), {} generated, {}, {:.3f} s",
                   id(), spec_.endpoint, m.prompt_tokens, ev.usage.cached_prompt_tokens,
                   m.generation_tokens, reason, m.e2e_seconds);
    }
    sink_->on_finish(result);
    ctx_.live().remove(id());
  }

  ApiContext& ctx_;
  GenerationSpec spec_;
  std::shared_ptr<GenerationSink> sink_;
  std::vector<SampleState> samples_;
  const Clock::time_point arrival_;
  Clock::time_point last_output_;
  bool first_token_ = false;
  std::atomic<bool> client_gone_{false};
};

}  // namespace

std::string start_generation(ApiContext& ctx, GenerationSpec spec, std::shared_ptr<GenerationSink> sink,
                      std::shared_ptr<Responder> responder) {
  if (spec.request.id.empty()) spec.request.id = ctx.make_id("req-");
  try {
    ctx.engine().validate(spec.request);
  } catch (const Error& e) {
    throw bad_request(e);
  }
  if (ctx.draining()) {
    throw ApiError(503, "", "the server is shutting down and takes no new requests");
  }
  if (ctx.engine().queue_full()) {
    throw ApiError(429, "", "too many requests are waiting (--max-waiting-requests); retry later");
  }
  const std::string id = spec.request.id;
  engine::EngineRequest request = spec.request;
  std::shared_ptr<SseStream> stream = spec.stream;
  auto generation = std::make_shared<Generation>(ctx, std::move(spec), sink);
  ctx.live().add(id, stream);
  if (stream) stream->start();
  sink->on_start();
  try {
    ctx.engine().submit(std::move(request),
                        [generation](const engine::RequestOutput& ev) { generation->on_event(ev); });
  } catch (const engine::QueueFullError& e) {
    if (!stream) {
      ctx.live().remove(id);
      throw ApiError(429, "", "{}", e.what());
    }
    generation->fail(e.what());
    return id;
  } catch (const Error& e) {
    ctx.live().remove(id);
    if (!stream) throw bad_request(e);
    generation->fail(e.what());
    return id;
  }
  engine::Engine& engine = ctx.engine();
  std::weak_ptr<Generation> weak = generation;
  responder->on_disconnect([weak, &engine, id] {
    if (auto g = weak.lock()) g->client_gone();
    engine.abort(id);
  });
  return id;
}

}  // namespace flint::server
