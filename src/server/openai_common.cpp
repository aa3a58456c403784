#include "server/openai_common.h"

#include "server/api_error.h"

namespace flint::server {

StreamOptions parse_stream_options(const Json& body) {
  StreamOptions o;
  o.stream = get_bool(body, "stream").value_or(false);
  if (const Json* options = get_object(body, "stream_options")) {
    if (!o.stream) {
      throw ApiError(400, "stream_options", "stream_options: only allowed with \"stream\": true");
    }
    o.include_usage = get_bool(*options, "include_usage", "stream_options").value_or(false);
    o.continuous_usage_stats =
        get_bool(*options, "continuous_usage_stats", "stream_options").value_or(false);
  }
  return o;
}

void apply_request_extras(const ApiContext& ctx, const Json& body,
                          engine::EngineRequest& request) {
  if (auto salt = get_string(body, "cache_salt")) request.cache_salt = *salt;
  const Json* replay = get_array(body, "flint_debug_replay");
  if (replay == nullptr) return;
  if (!ctx.config().enable_debug_replay) {
    throw ApiError(400, "flint_debug_replay",
                   "flint_debug_replay: replaying given tokens as the model's output is a "
                   "debugging aid, off unless the server runs with --enable-debug-replay");
  }
  ForcedTokens forced;
  forced.then_stop = true;
  for (std::size_t i = 0; i < replay->size(); ++i) {
    if (!(*replay)[i].is_number_integer()) {
      const std::string path = join_path("flint_debug_replay", i);
      throw ApiError(400, path, "{}: expected a token id", path);
    }
    forced.tokens.push_back((*replay)[i].get<int32_t>());
  }
  if (forced.tokens.empty()) {
    throw ApiError(400, "flint_debug_replay", "flint_debug_replay: give at least one token id");
  }
  // The replay is the whole output (an EOS in it ends it, as a generated one would), and
  // max_tokens must leave room for it.
  const auto n = static_cast<int64_t>(forced.tokens.size());
  if (!request.sampling.max_tokens || *request.sampling.max_tokens < n) {
    request.sampling.max_tokens = n;
  }
  request.sampling.forced = std::move(forced);
}

void respond_aborted(Responder& responder) {
  responder.respond(503, "application/json",
                    openai_error_body(ApiError(503, "", "the request was aborted: the server is "
                                                        "shutting down")));
}

Json usage_json(const engine::Usage& usage) {
  return Json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}}};
}

std::string token_text(const ApiContext& ctx, int32_t id) {
  return std::string(ctx.tokenizer().token_bytes(id));
}

namespace {

Json bytes_of(std::string_view text) {
  Json bytes = Json::array();
  for (char c : text) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

}  // namespace

Json chat_logprobs_content(const ApiContext& ctx, const std::vector<SampleResult>& results) {
  Json content = Json::array();
  for (const SampleResult& r : results) {
    const std::string text = token_text(ctx, r.token);
    Json top = Json::array();
    for (const TokenLogprob& t : r.top) {
      const std::string top_text = token_text(ctx, t.token);
      top.push_back({{"token", top_text}, {"logprob", t.logprob}, {"bytes", bytes_of(top_text)}});
    }
    content.push_back({{"token", text},
                       {"logprob", r.logprob},
                       {"bytes", bytes_of(text)},
                       {"top_logprobs", std::move(top)}});
  }
  return content;
}

}  // namespace flint::server
