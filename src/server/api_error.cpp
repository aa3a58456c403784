#include "server/api_error.h"

#include <array>
#include <cctype>

#include "server/json_fields.h"

namespace flint::server {

std::string_view ApiError::type() const {
  if (status_ == 401) return "authentication_error";
  if (status_ == 403) return "permission_error";
  if (status_ == 404) return "not_found_error";
  if (status_ == 429) return "rate_limit_error";
  if (status_ >= 500) return "server_error";
  return "invalid_request_error";
}

std::string_view ApiError::anthropic_type() const {
  switch (status_) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status_ >= 500 ? "api_error" : "invalid_request_error";
  }
}

namespace {

// Sampling fields the engine names at the start of its messages without a colon
// ("temperature must be >= 0, got -1").
constexpr std::array kBareFields = {
    "temperature",    "top_p",        "top_k",          "min_p",      "presence_penalty",
    "frequency_penalty", "repetition_penalty", "n",     "max_tokens", "min_tokens",
    "logprobs",       "seed",         "stop",           "logit_bias", "stop_token_ids"};

bool path_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '[' ||
         c == ']';
}

}  // namespace

ApiError bad_request(const Error& e) {
  const std::string_view message = e.what();
  std::size_t end = 0;
  while (end < message.size() && path_char(message[end])) ++end;
  const std::string_view word = message.substr(0, end);
  std::string param;
  if (end > 0 && end < message.size() && message[end] == ':') {
    param = word;
  } else if (end > 0 && end < message.size() && message[end] == ' ') {
    for (const char* field : kBareFields) {
      if (word == field) param = word;
    }
  }
  return ApiError(400, std::move(param), std::string(message));
}

ApiError invalid_field(std::string param, std::string_view message) {
  return ApiError(400, param, "{}: {}", param, message);
}

std::string openai_error_body(const ApiError& e) {
  Json error = {{"message", e.what()},
                {"type", e.type()},
                {"param", e.param().empty() ? Json(nullptr) : Json(e.param())},
                {"code", e.status()}};
  return dump_json(Json{{"error", std::move(error)}});
}

std::string anthropic_error_body(const ApiError& e) {
  return dump_json(
      Json{{"type", "error"}, {"error", {{"type", e.anthropic_type()}, {"message", e.what()}}}});
}

}  // namespace flint::server
