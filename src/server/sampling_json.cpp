#include "server/sampling_json.h"

#include <charconv>

#include "server/api_error.h"

namespace flint::server {

namespace {

template <typename T>
void set(T& target, const std::optional<T>& value) {
  if (value) target = *value;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const Json& object) {
  std::vector<std::pair<int32_t, float>> out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string path = join_path("logit_bias", it.key());
    int64_t id = -1;
    const std::string& key = it.key();
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX) {
      throw ApiError(400, "logit_bias", "logit_bias: key '{}' is not a token id", key);
    }
    if (!it.value().is_number()) {
      throw ApiError(400, path, "{}: expected a number, got {}", path, json_type_name(it.value()));
    }
    out.emplace_back(static_cast<int32_t>(id), it.value().get<float>());
  }
  return out;
}

}  // namespace

SamplingParams parse_sampling(const Json& body, const SamplingParams& defaults,
                              SamplingDialect dialect) {
  SamplingParams p = defaults;
  set(p.temperature, get_number(body, "temperature"));
  set(p.top_p, get_number(body, "top_p"));
  set(p.top_k, get_int(body, "top_k"));
  set(p.min_p, get_number(body, "min_p"));
  set(p.presence_penalty, get_number(body, "presence_penalty"));
  set(p.frequency_penalty, get_number(body, "frequency_penalty"));
  set(p.repetition_penalty, get_number(body, "repetition_penalty"));
  set(p.n, get_int(body, "n"));
  if (auto best_of = get_int(body, "best_of"); best_of && *best_of != p.n) {
    throw ApiError(400, "best_of", "best_of: only best_of == n is supported, got {} with n {}",
                   *best_of, p.n);
  }
  if (auto seed = get_int(body, "seed")) p.seed = static_cast<uint64_t>(*seed);
  if (auto stop = get_string_or_list(body, "stop")) p.stop = std::move(*stop);
  if (const Json* ids = get_array(body, "stop_token_ids")) {
    p.stop_token_ids.clear();
    for (std::size_t i = 0; i < ids->size(); ++i) {
      if (!(*ids)[i].is_number_integer()) {
        const std::string path = join_path("stop_token_ids", i);
        throw ApiError(400, path, "{}: expected a token id, got {}", path,
                       json_type_name((*ids)[i]));
      }
      p.stop_token_ids.push_back((*ids)[i].get<int32_t>());
    }
  }
  set(p.include_stop_str_in_output, get_bool(body, "include_stop_str_in_output"));
  set(p.ignore_eos, get_bool(body, "ignore_eos"));
  set(p.min_tokens, get_int(body, "min_tokens"));
  set(p.skip_special_tokens, get_bool(body, "skip_special_tokens"));
  if (const Json* bias = get_object(body, "logit_bias")) p.logit_bias = parse_logit_bias(*bias);

  std::optional<int64_t> max_tokens = get_int(body, "max_tokens");
  if (dialect == SamplingDialect::kChat) {
    if (auto mct = get_int(body, "max_completion_tokens")) max_tokens = mct;
    const std::optional<bool> logprobs = get_bool(body, "logprobs");
    const std::optional<int64_t> top = get_int(body, "top_logprobs");
    if (top && !logprobs.value_or(false)) {
      throw ApiError(400, "top_logprobs", "top_logprobs: needs \"logprobs\": true");
    }
    if (top && (*top < 0 || *top > 20)) {
      throw ApiError(400, "top_logprobs", "top_logprobs: must be in [0, 20], got {}", *top);
    }
    if (logprobs.value_or(false)) p.logprobs = top.value_or(0);
  } else {
    if (auto logprobs = get_int(body, "logprobs")) {
      if (*logprobs < 0) {
        throw ApiError(400, "logprobs", "logprobs: must be >= 0, got {}", *logprobs);
      }
      p.logprobs = *logprobs;
    }
  }
  if (max_tokens) p.max_tokens = *max_tokens;
  return p;
}

}  // namespace flint::server
